"""Reading one board image from bytes, refusing what is not a whole image of a sane size, with the reason.

OpenCV decodes a truncated JPEG without complaint (the missing rows come out grey) and decodes any size it
is given, so the checks come first: the format from its signature, the size from its header (Pillow reads
headers without decoding), the format's end marker for the two formats a camera or scanner writes (JPEG's
EOI, PNG's IEND), and only then the decode.
"""
from __future__ import annotations

import errno
import io
from pathlib import Path

import cv2
import numpy as np
from PIL import BmpImagePlugin, JpegImagePlugin, PngImagePlugin, TiffImagePlugin

DEFAULT_MAX_PIXELS = 40_000_000  # 40 MP: larger than any line camera's frame, small enough to decode safely
SIGNATURES = {b"\xff\xd8\xff": "JPEG", b"\x89PNG\r\n\x1a\n": "PNG", b"BM": "BMP", b"II*\x00": "TIFF",
              b"MM\x00*": "TIFF"}
READERS = {"JPEG": JpegImagePlugin.JpegImageFile, "PNG": PngImagePlugin.PngImageFile,
           "BMP": BmpImagePlugin.BmpImageFile, "TIFF": TiffImagePlugin.TiffImageFile}
TAIL = 64  # bytes at the end searched for the end marker (some writers pad)


class BadImage(ValueError):
    """This file is not a usable board image; the message says why and what to do."""


def image_format(data: bytes) -> str | None:
    return next((name for sig, name in SIGNATURES.items() if data.startswith(sig)), None)


def _header_size(data: bytes, fmt: str) -> tuple[int, int]:
    try:  # the header of the format the signature names, through its own reader: never Image.open, which a
        # library may wrap (ultralytics' wrapper tries to install a HEIF plugin on an unidentified image)
        with READERS[fmt](io.BytesIO(data)) as im:
            return im.size
    except Exception as exc:  # noqa: BLE001 - PIL raises SyntaxError, OSError, ValueError... for a bad header
        raise BadImage(f"a damaged {fmt} header ({type(exc).__name__}: {exc})") from None


def image_size(path: Path) -> tuple[int, int]:
    """(width, height) of an image file from its header, nothing decoded; BadImage when it is not one."""
    data = Path(path).read_bytes()
    fmt = image_format(data)
    if fmt is None:
        raise BadImage(f"{path}: not an image (starts with {data[:8]!r})")
    return _header_size(data, fmt)


def read_image(data: bytes, name: str = "image", max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """HxWx3 BGR uint8, or BadImage."""
    if not data:
        raise BadImage("empty file (0 bytes); the scanner or camera wrote nothing")
    fmt = image_format(data)
    if fmt is None:
        raise BadImage(f"not an image (starts with {data[:8]!r}); drop only PNG, JPEG, BMP or TIFF files here")
    width, height = _header_size(data, fmt)
    if width * height > max_pixels:
        raise BadImage(f"{width}x{height} px is over the limit of {max_pixels / 1e6:.0f} MP; send smaller frames or "
                       "raise --max-pixels")
    tail = data[-TAIL:]
    if fmt == "JPEG" and b"\xff\xd9" not in tail:
        raise BadImage("truncated JPEG (no end-of-image marker): the file was cut short; resend it")
    if fmt == "PNG" and b"IEND" not in tail:
        raise BadImage("truncated PNG (no IEND chunk): the file was cut short; resend it")
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise BadImage(f"a damaged {fmt} image that cannot be decoded; resend it")
    return image


def write_image(path: Path, image: np.ndarray) -> None:
    """Write `image` (format from the suffix), or raise OSError saying why. OpenCV's imwrite only returns False (and
    libpng prints to stderr) when the disk is full, so a dataset cut on a full disk went on writing nothing and
    reported success; encoding in memory and writing from Python keeps the kernel's reason."""
    ok, data = cv2.imencode(path.suffix or ".png", image)
    if not ok:
        raise ValueError(f"cannot encode an image of shape {image.shape} as {path.suffix!r} for {path}")
    try:
        with open(path, "wb") as f:
            f.write(data.tobytes())
    except OSError as exc:
        hint = "free space and run again" if exc.errno == errno.ENOSPC else "check the folder exists and is writable"
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror}; {hint}") from exc
