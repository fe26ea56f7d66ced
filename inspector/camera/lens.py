"""The lens: intrinsics and distortion from views of a chessboard target, and frames undistorted with them.

A board's fiducials register it by a plane-to-plane transform, which a lens
that bends straight lines breaks: at the corners of a wide field a few pixels
of barrel distortion are more than the recipe's residual allows. So each
camera is calibrated once (OpenCV's calibrateCamera on a printed chessboard
shown in several tilts), and every frame is undistorted before registration.
The undistorted frame keeps the camera matrix (`newCameraMatrix` = K), so
pixels at the centre keep their size and the rule set's layout stays valid.

A camera is also never mounted exactly square to the conveyor, and its tilt
does not change from board to board. One more view, of the target lying flat
where boards lie (`plane`), measures it: frames are then also rectified to a
square-on view at the same scale, so a board differs from its recipe only by
where it lies (a similarity, which four marks over-determine and so check),
instead of by a perspective that four marks fit whatever they are. Lens and
tilt are one remap, its tables computed once.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from ..ingest.registration import fit_transform, map_points

MIN_VIEWS = 4  # views of the target found: fewer cannot separate focal length from distortion
# a view whose corners fit the solved lens worse than this many times the views' median (and by over a pixel) was
# found wrongly (a corner on a reflection, the grid's order read backwards): it is left out and the lens solved again
OUTLIER_FACTOR = 5.0
OUTLIER_FLOOR_PX = 1.0


class CalibrationFailed(ValueError):
    """The views cannot calibrate the lens; the message says which views and what to do."""


@dataclass
class LensCalibration:
    camera_matrix: list[list[float]]  # 3x3
    distortion: list[float]  # k1, k2, p1, p2, k3 (OpenCV's order)
    size: tuple[int, int]  # (width, height) of the frames it was measured on
    rms_px: float  # reprojection error of the target's corners
    views: int  # views the target was found in
    pattern: tuple[int, int]  # inner corners (columns, rows)
    rectify: list[list[float]] | None = None  # 3x3: undistorted px -> square-on px (the conveyor plane), or None
    plane_rms_px: float | None = None  # how far the flat target's corners lie from a square grid after it
    left_out: dict[str, float] = field(default_factory=dict)  # views found but not used: name -> their rms px
    _maps: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        return {"camera_matrix": self.camera_matrix, "distortion": self.distortion, "size": list(self.size),
                "rms_px": self.rms_px, "views": self.views, "pattern": list(self.pattern), "rectify": self.rectify,
                "plane_rms_px": self.plane_rms_px, "left_out": self.left_out}

    @classmethod
    def from_json(cls, doc: dict) -> LensCalibration:
        k = np.asarray(doc["camera_matrix"], np.float64)
        d = np.asarray(doc["distortion"], np.float64).reshape(-1)
        if k.shape != (3, 3) or d.size not in (4, 5, 8) or not np.isfinite(k).all() or not np.isfinite(d).all():
            raise ValueError("lens calibration: camera_matrix must be 3x3 and distortion 4, 5 or 8 numbers; "
                             "calibrate again with `inspector camera calibrate`")
        rect = doc.get("rectify")
        if rect is not None and np.asarray(rect, np.float64).shape != (3, 3):
            raise ValueError("lens calibration: rectify must be 3x3; calibrate again with `inspector camera calibrate`")
        return cls(k.tolist(), d.tolist(), (int(doc["size"][0]), int(doc["size"][1])), float(doc["rms_px"]),
                   int(doc["views"]), (int(doc["pattern"][0]), int(doc["pattern"][1])), rect,
                   doc.get("plane_rms_px"), {str(k): float(v) for k, v in (doc.get("left_out") or {}).items()})

    def undistort(self, image: np.ndarray) -> np.ndarray:
        """The frame as a lens without distortion would have taken it (same size, same camera matrix)."""
        h, w = image.shape[:2]
        if (w, h) != self.size:
            raise ValueError(f"the lens was calibrated on {self.size[0]}x{self.size[1]} frames, this one is {w}x{h}; "
                             f"calibrate again at the camera's current resolution (or binning)")
        if self._maps is None:
            self._maps = _maps(np.asarray(self.camera_matrix, np.float64), np.asarray(self.distortion, np.float64),
                               None if self.rectify is None else np.asarray(self.rectify, np.float64), self.size)
        # cubic: a bilinear resample blurs a sharp frame about as much as a defocus the experts never saw (measured:
        # the Laplacian's variance 2317 -> 1308 bilinear, 1876 cubic), for 5.8 ms of CPU a 640x400 frame instead of
        # 1.8, on the source's thread (the ONNX Runtime line's parts/s with either: within its run-to-run noise)
        return cv2.remap(image, self._maps[0], self._maps[1], cv2.INTER_CUBIC, borderMode=cv2.BORDER_REPLICATE)


def _maps(k: np.ndarray, dist: np.ndarray, rectify: np.ndarray | None,
          size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """remap() tables: each output pixel's place in the raw frame (through the tilt's inverse, then the lens)."""
    w, h = size
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    pts = np.stack([xs.ravel(), ys.ravel()], 1)
    if rectify is not None:
        pts = cv2.perspectiveTransform(pts.reshape(-1, 1, 2), np.linalg.inv(rectify)).reshape(-1, 2)
    norm = np.column_stack([(pts[:, 0] - k[0, 2]) / k[0, 0], (pts[:, 1] - k[1, 2]) / k[1, 1], np.ones(len(pts))])
    raw, _ = cv2.projectPoints(norm.reshape(-1, 1, 3), np.zeros(3), np.zeros(3), k, dist)
    raw = raw.reshape(h, w, 2).astype(np.float32)
    return cv2.convertMaps(raw[:, :, 0], raw[:, :, 1], cv2.CV_16SC2)  # fixed-point: a little faster than float


def _plane(corners: np.ndarray, grid: np.ndarray, k: np.ndarray, dist: np.ndarray) -> tuple[np.ndarray, float]:
    """(3x3 from undistorted px to a square-on view of the flat target at its own scale and place, its rms px)."""
    und = cv2.undistortPoints(corners, k, dist, P=k).reshape(-1, 2).astype(np.float64)
    square = map_points(fit_transform(grid, und, "similarity"), grid)  # where a square-on camera would see them
    hm, _ = cv2.findHomography(und, square, 0)
    err = np.hypot(*(map_points(hm, und) - square).T)
    return hm, float(np.sqrt((err ** 2).mean()))


def find_target(image: np.ndarray, pattern: tuple[int, int]) -> np.ndarray | None:
    """The chessboard's inner corners to a tenth of a pixel (Nx1x2 float32), or None when it is not all in view."""
    gray = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    ok, corners = cv2.findChessboardCorners(gray, pattern, cv2.CALIB_CB_ADAPTIVE_THRESH | cv2.CALIB_CB_NORMALIZE_IMAGE)
    if not ok:
        return None
    criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 50, 0.01)
    return cv2.cornerSubPix(gray, corners, (5, 5), (-1, -1), criteria)


def calibrate(images: list[np.ndarray], pattern: tuple[int, int], names: list[str] | None = None,
              plane: np.ndarray | None = None) -> LensCalibration:
    """The lens from views of a chessboard with `pattern` inner corners, and with `plane` (the target lying flat
    where boards lie) the camera's tilt too; CalibrationFailed names the views the target was not found in when
    too few remain."""
    names = names or [f"view {i + 1}" for i in range(len(images))]
    sizes = {(im.shape[1], im.shape[0]) for im in images}
    if len(sizes) != 1:
        raise CalibrationFailed(f"the views differ in size ({', '.join(f'{w}x{h}' for w, h in sorted(sizes))}); "
                                "take every view at the camera's working resolution")
    grid = np.zeros((pattern[0] * pattern[1], 3), np.float32)
    grid[:, :2] = np.mgrid[0:pattern[0], 0:pattern[1]].T.reshape(-1, 2)
    obj, img, found, missed = [], [], [], []
    for name, image in zip(names, images):
        corners = find_target(image, pattern)
        if corners is None:
            missed.append(name)
            continue
        obj.append(grid)
        img.append(corners)
        found.append(name)
    if len(img) < MIN_VIEWS:
        raise CalibrationFailed(
            f"the {pattern[0]}x{pattern[1]} chessboard was found in {len(img)} of {len(images)} views, "
            f"{MIN_VIEWS} needed" + (f" (not found in: {', '.join(missed[:8])}{' ...' if len(missed) > 8 else ''})"
                                     if missed else "")
            + "; check --pattern (inner corners, columns x rows) and show the whole target, tilted differently in "
              "each view")
    size = sizes.pop()
    rms, k, d, kept, left_out = _solve(obj, img, found, size)
    lens = LensCalibration(k.tolist(), d.reshape(-1).tolist(), size, rms, kept, pattern, left_out=left_out)
    if plane is not None:
        if (plane.shape[1], plane.shape[0]) != size:
            raise CalibrationFailed("the flat view differs in size from the others; take it at the same resolution")
        corners = find_target(plane, pattern)
        if corners is None:
            raise CalibrationFailed(f"the {pattern[0]}x{pattern[1]} chessboard was not found in the flat view; lay "
                                    "the whole target flat where boards lie, in good light")
        hm, plane_rms = _plane(corners, grid[:, :2].astype(np.float64), k, d)
        lens.rectify, lens.plane_rms_px = hm.tolist(), plane_rms
    return lens


def _solve(obj: list[np.ndarray], img: list[np.ndarray], names: list[str], size: tuple[int, int]
           ) -> tuple[float, np.ndarray, np.ndarray, int, dict[str, float]]:
    """calibrateCamera on the found views, solved again without any view that fits far worse than the rest (one
    bad view pulls the whole lens off: a 4x3 target read backwards once in 23 views made 2.4 px of 0.08)."""
    flags = cv2.CALIB_ZERO_TANGENT_DIST | cv2.CALIB_FIX_K3  # a machine-vision lens: radial k1, k2 are what move
    left_out: dict[str, float] = {}
    while True:
        rms, k, d, _, _, _, _, errors = cv2.calibrateCameraExtended(obj, img, size, None, None, flags=flags)
        errors = errors.reshape(-1)
        bound = max(OUTLIER_FLOOR_PX, OUTLIER_FACTOR * float(np.median(errors)))
        bad = [i for i, e in enumerate(errors) if e > bound]
        if not bad or len(img) - len(bad) < MIN_VIEWS:
            return float(rms), k, d, len(img), left_out
        left_out.update({names[i]: round(float(errors[i]), 3) for i in bad})
        obj, img, names = ([x for i, x in enumerate(seq) if i not in bad] for seq in (obj, img, names))


def load_views(paths: list[Path]) -> tuple[list[np.ndarray], list[str]]:
    """Calibration views from image files (every readable one; an unreadable file is named)."""
    images, names = [], []
    for p in paths:
        image = cv2.imread(str(p), cv2.IMREAD_COLOR)
        if image is None:
            raise CalibrationFailed(f"{p}: not a readable image; give the calibration views as PNG/JPEG/BMP files")
        images.append(image)
        names.append(p.name)
    return images, names
