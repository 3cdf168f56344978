"""OCR of page images with Tesseract (Apache-2.0), run as Debian's `tesseract` command.

Chosen by measurement and licence: on an A4 page at 150 dpi both Tesseract 5.3 and RapidOCR read
every character, Tesseract about 5x faster (19.8 s against 114 s in the same minute on a loaded
2-core machine), and RapidOCR's wheels pull Shapely, which bundles the LGPL GEOS library. `dev.sh`
installs `tesseract-ocr` as root; without the command, scanned pages give no text and the document
is marked `indexed_with_warnings` with the reason (textyield.py), nothing fails.
"""

from __future__ import annotations

import io
import shutil
import subprocess

import numpy as np
from PIL import Image

MIN_SIDE = 32  # smaller images are icons or rules, never a scanned page
TIMEOUT_S = 120  # one page; a stuck OCR must not hold the worker until its task limit


class OcrUnavailable(RuntimeError):
    """No OCR engine on this host: the page cannot be read (the text-yield check says so)."""


def _binarized(image: Image.Image) -> Image.Image:
    """Black text on white at Otsu's threshold. NOTE: scans are mostly JPEG; the ringing around
    small glyphs costs recognisers spaces and whole lines, which a clean two-tone page avoids."""
    gray = np.asarray(image.convert("L"))
    counts = np.bincount(gray.ravel(), minlength=256).astype(np.float64)
    levels = np.arange(256)
    weight = np.cumsum(counts)
    mean = np.cumsum(counts * levels)
    total, grand = weight[-1], mean[-1]
    between = (grand * weight - mean * total) ** 2 / np.maximum(weight * (total - weight), 1)
    threshold = int(np.argmax(between))
    return Image.fromarray(np.where(gray > threshold, 255, 0).astype(np.uint8))


def ocr_image(image: Image.Image) -> str:
    """The image's text lines, top to bottom; OcrUnavailable without a `tesseract` command."""
    if min(image.size) < MIN_SIDE:
        return ""
    binary = shutil.which("tesseract")
    if binary is None:
        raise OcrUnavailable("no OCR engine: install Debian's tesseract-ocr to read scanned pages")
    png = io.BytesIO()
    _binarized(image).save(png, "PNG")
    # NOTE: one thread; the worker's own parallelism is per document, and OpenMP threads per page
    # only compete with the embedding model on a small machine.
    done = subprocess.run(
        [binary, "stdin", "stdout", "--psm", "3"],
        input=png.getvalue(),
        capture_output=True,
        timeout=TIMEOUT_S,
        env={"OMP_THREAD_LIMIT": "1", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    if done.returncode != 0:
        raise OcrUnavailable(f"tesseract failed: {done.stderr.decode(errors='replace')[-300:]}")
    lines = done.stdout.decode("utf-8", errors="replace").splitlines()
    return "\n".join(line.strip() for line in lines if line.strip())
