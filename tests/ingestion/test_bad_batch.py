"""A decompression-bomb DOCX fails before it is inflated (issue 12: a 755 KB DOCX unpacking to
200 MB took a worker from 1 GB to 19.65 GB)."""

from __future__ import annotations

import psutil
import pytest

from ingestion.errors import PermanentError
from ingestion.parsers import parse
from tests.ingestion.samples import zip_bomb_docx


@pytest.mark.unit
def test_zip_bomb_docx_fails_before_it_is_inflated():
    bomb = zip_bomb_docx()
    assert len(bomb) < 2_000_000
    rss = psutil.Process().memory_info().rss
    with pytest.raises(PermanentError) as refused:
        parse(bomb, "bomb.docx")
    assert refused.value.code == "unpacked_too_large"
    assert psutil.Process().memory_info().rss - rss < 50_000_000
