"""The camera conditions the accuracy suite runs the line under, by name, and its held-out seed.

Apart from the suite (accuracy.py, which imports the line and torch) so the command's options can list them
without importing either: `inspector accuracy --help`, or a mistyped `--dataset`, answers at once.
"""
from __future__ import annotations

from ..ingest.camera_model import CameraModel

HELD_OUT_SEED = 7919  # the demo zoo trains and validates on seeds 0 and 1 (training/demo_zoo.py); the demo line: 1000

PLACEMENT = CameraModel(shift_px=10, rotation_deg=1.0, scale=0.01)
REAL_LENS = CameraModel(shift_px=10, rotation_deg=1.0, scale=0.01, tilt_deg=(2.0, -1.5), distortion=(-0.1, -0.1),
                        vignette=(0.3, 0.3), cast=(0.15, 0.15), motion_px=(1.5, 1.5), gain=(0.9, 1.2),
                        noise_sigma=(4.0, 4.0), blur_sigma=(0.6, 0.6), jpeg_quality=(85, 85))
CONDITIONS: dict[str, CameraModel] = {
    "clean": CameraModel(),
    "gain-0.6": CameraModel(gain=(0.6, 0.6)),
    "gain-1.4": CameraModel(gain=(1.4, 1.4)),
    "contrast-0.7": CameraModel(contrast=(0.7, 0.7)),
    "uneven-light": CameraModel(gradient=0.25),
    "blur-1.2": CameraModel(blur_sigma=(1.2, 1.2)),
    "noise-6": CameraModel(noise_sigma=(6.0, 6.0)),
    "jpeg-60": CameraModel(jpeg_quality=(60, 60)),
    "placement": PLACEMENT,
    "combined": CameraModel(shift_px=10, rotation_deg=1.0, scale=0.01, gain=(0.6, 1.4), contrast=(0.7, 0.7),
                            gradient=0.25, blur_sigma=(1.2, 1.2), noise_sigma=(6.0, 6.0), jpeg_quality=(60, 60)),
    # a real camera: what calibration and a reference capture correct (tilt, lens, vignetting, cast), what training
    # must cover (motion blur along the conveyor, noise at high gain), each alone and all together
    "tilt-2": CameraModel(tilt_deg=(2.0, -1.5)),
    "lens-k1": CameraModel(distortion=(-0.1, -0.1)),
    "vignette-0.3": CameraModel(vignette=(0.3, 0.3)),
    "cast-0.15": CameraModel(cast=(0.15, 0.15)),
    "motion-2": CameraModel(motion_px=(2.0, 2.0)),
    "high-gain": CameraModel(gain=(1.3, 1.3), noise_sigma=(10.0, 10.0)),
    "bayer": CameraModel(bayer="RG"),  # a colour sensor's mosaic, demosaicked bilinearly by its driver
    "real-lens": REAL_LENS,
    "real-lens-raw": REAL_LENS,  # the same camera without its correction file: what the line did before
}
UNCORRECTED = {"real-lens-raw"}  # conditions run without the camera's correction though it needs one
