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

    # NOTE: the default detection input (shorter side 736) shrinks an A4 page at 150 dpi so much that
    # a third of its lines went undetected; the longer side at 1600 found them all.
    return RapidOCR(det_limit_side_len=1600, det_limit_type="max")


def _binarized(image: Image.Image) -> np.ndarray:
    """Black text on white at Otsu's threshold. NOTE: scans are mostly JPEG; on the ringing around
    small glyphs the recogniser drops spaces and whole lines, which a clean two-tone page avoids."""
    gray = np.asarray(image.convert("L"))
    counts = np.bincount(gray.ravel(), minlength=256).astype(np.float64)
    levels = np.arange(256)
    weight = np.cumsum(counts)
    mean = np.cumsum(counts * levels)
    total, grand = weight[-1], mean[-1]
    between = (grand * weight - mean * total) ** 2 / np.maximum(weight * (total - weight), 1)
    threshold = int(np.argmax(between))
    binary = np.where(gray > threshold, 255, 0).astype(np.uint8)
    return np.stack([binary] * 3, axis=-1)


def ocr_image(image: Image.Image) -> str:
    """The image's text lines, top to bottom."""
    if min(image.size) < MIN_SIDE:
        return ""
    # Scans are upright: the text-direction classifier only costs time.
    result, _ = _engine()(_binarized(image), use_cls=False)
    if not result:
        return ""
    # Each line: (box corners, text, score). Rows by the box's top, then left to right.
    lines = sorted(result, key=lambda r: (round(min(p[1] for p in r[0]) / 10), min(p[0] for p in r[0])))
    return "\n".join(line[1].strip() for line in lines if line[1].strip())
