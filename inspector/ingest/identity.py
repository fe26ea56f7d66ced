"""The board's serial, read from its own DataMatrix or QR code (zxing-cpp), or NOREAD with the reason.

The code's region comes from the rule set (routing/identity.py) and is cut through the board's registration,
so a board placed off its nominal spot is read where its code really lies. A decoder finds modules of a few
pixels through a soft lens, noise and JPEG far more often when they are about `MODULE_PX` pixels wide, so the
region is first enlarged to that (bicubic), then tried as it is, then enlarged further (bicubic, Lanczos):
the way a code reader's retries go. The raw decoded text is the serial; nothing is ever guessed.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import zxingcpp

from ..routing.identity import NOREAD, SerialCode
from .registration import as_homography, warp_inverse

FORMATS = {"datamatrix": zxingcpp.BarcodeFormat.DataMatrix, "qr": zxingcpp.BarcodeFormat.QRCode}
GROW = 1.25  # the region is cut this much larger than the rule set says, for placement and registration error
MODULE_PX = 4.5  # the module width the decoder reads best at (measured on blurred, noisy, JPEG-compressed codes)


@dataclass(frozen=True)
class CodeRead:
    """What the reader made of one board: the text, or None and why not."""

    text: str | None
    reason: str = ""  # why there is no text (NOREAD)
    attempts: int = 1  # 1: the first try read it

    @property
    def ok(self) -> bool:
        return self.text is not None


def noread_serial(inspection_id: str) -> str:
    """The serial a board is inspected under when its code cannot be read: NOREAD and its inspection id."""
    return f"{NOREAD}-{inspection_id[:8]}"


def code_region(image: np.ndarray, code: SerialCode, matrix: np.ndarray | None) -> np.ndarray:
    """The code's region as a grey image upright in recipe px, cut through `matrix` (recipe -> image px)."""
    gray = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    box = code.box()
    if box is None:
        return gray
    side = int(round(code.size * GROW))
    x0 = code.at[0] - side / 2  # type: ignore[index]
    y0 = code.at[1] - side / 2  # type: ignore[index]
    a = np.eye(3) if matrix is None else as_homography(matrix)
    shift = np.array([[1, 0, x0], [0, 1, y0], [0, 0, 1]], np.float64)
    return warp_inverse(gray, a @ shift, (side, side), border=cv2.BORDER_REPLICATE)


def read_code(image: np.ndarray, code: SerialCode, matrix: np.ndarray | None = None) -> CodeRead:
    """Read the board's code; `matrix` is its registration (2x3 or 3x3, recipe px -> image px) or None (as
    placed)."""
    region = code_region(image, code, matrix)
    fmt = FORMATS[code.symbology]
    best = max(1.0, MODULE_PX / code.module_px)
    local, histogram = zxingcpp.Binarizer.LocalAverage, zxingcpp.Binarizer.GlobalHistogram
    tries = [(best, cv2.INTER_CUBIC, local), (1.0, None, local), (best * 4 / 3, cv2.INTER_CUBIC, local),
             (best * 4 / 3, cv2.INTER_LANCZOS4, local), (best, cv2.INTER_CUBIC, histogram),
             (best * 5 / 3, cv2.INTER_CUBIC, local)]
    if best == 1.0:
        tries = tries[1:]
    texts: set[str] = set()
    for n, (scale, how, binarizer) in enumerate(tries, 1):
        image = region if how is None else cv2.resize(region, None, fx=scale, fy=scale, interpolation=how)
        found = zxingcpp.read_barcodes(np.ascontiguousarray(image), formats=fmt, binarizer=binarizer)
        texts = {b.text for b in found if b.valid and b.text}
        if len(texts) == 1:
            return CodeRead(texts.pop(), attempts=n)
        if len(texts) > 1:
            return CodeRead(None, f"{len(texts)} different {code.symbology} codes in the region "
                                  f"({', '.join(sorted(texts))}); one board, one code", n)
    where = "the whole board" if code.at is None else f"the region around {code.at}"
    return CodeRead(None, f"no {code.symbology} code decoded in {where}; check that it is printed, clean and in "
                          "focus", len(tries))


def code_image(text: str, code: SerialCode) -> np.ndarray:
    """The code of `text` as a grey image (dark modules on white, its quiet zone included), printed at
    `module_px` per module: what the synthetic renderer puts on a board."""
    options = {"force_square": True} if code.symbology == "datamatrix" else {}
    barcode = zxingcpp.create_barcode(text, FORMATS[code.symbology], **options)
    return np.asarray(barcode.to_image(scale=code.module_px, add_quiet_zones=True), np.uint8)
