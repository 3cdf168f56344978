"""OCR of page images with RapidOCR (PaddleOCR's detection and recognition models on ONNX
Runtime, Apache-2.0; the models ship inside the `rapidocr-onnxruntime` wheel, so nothing is
downloaded and no system package is needed). Chosen over Debian's tesseract-ocr, which needs apt
(root) on every host; see ingestion/README.md for the measurement."""

from __future__ import annotations

import logging
from functools import lru_cache

import numpy as np
from PIL import Image

log = logging.getLogger(__name__)
MIN_SIDE = 32  # smaller images are icons or rules, never a scanned page


@lru_cache(maxsize=1)
def _engine():
    """One engine per process (loading the models takes about a second)."""
    from rapidocr_onnxruntime import RapidOCR

    return RapidOCR()


def ocr_image(image: Image.Image) -> str:
    """The image's text lines, top to bottom."""
    if min(image.size) < MIN_SIDE:
        return ""
    result, _ = _engine()(np.asarray(image.convert("RGB")))
    if not result:
        return ""
    # Each line: (box corners, text, score). Rows by the box's top, then left to right.
    lines = sorted(result, key=lambda r: (round(min(p[1] for p in r[0]) / 10), min(p[0] for p in r[0])))
    return "\n".join(line[1].strip() for line in lines if line[1].strip())
