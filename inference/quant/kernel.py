"""Our CPU matmul over 4/8-bit weights (`qmatmul.c`), compiled once per source and CPU, loaded by ctypes
(`compiled` builds our other C kernels too).

torch's own packed kernels (`_weight_int4pack_mm_for_cpu`, `_weight_int8pack_mm`) measured 28x and 23x
slower than fp32 `F.linear` at one row on this AVX2 host (no AVX-512), so they are not used.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("qmatmul.c")
HEADER = Path(__file__).parents[1] / "simd.h"  # included by our kernels: part of every build's identity
GROUP = 32  # weights and activations are quantized in groups of this many along k
# NOTE: OpenMP workers sleep between our calls (OMP_WAIT_POLICY=PASSIVE, which keeps two runtimes,
# torch's and ours, from spinning against each other), and waking them costs more than a small matmul
# gains from a second core. Calls reading fewer bytes than this run on one thread. Decode steps of
# quantized models avoid the question: decode_layer.c keeps its threads awake for the whole step.
PARALLEL_MIN_BYTES = 2 << 20


def cpu_flags() -> set[str]:
    """The CPU's feature flags (avx2, avx512f, avx512_vnni, amx_bf16, ...), read at run time."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@cache
def has_amx() -> bool:
    """Whether this CPU has AMX tiles for bf16, through which oneDNN multiplies (read once)."""
    return "amx_bf16" in cpu_flags()


def native_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX), which oneDNN uses through torch:
    measured 2.5x fp32 sgemm on long chunks (2 cores, Zen 4). Without it bf16 is emulated: slower."""
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


@dataclass(frozen=True)
class QuantWeight:
    """A `[n, k]` weight in groups of 32 along k: w = d * q + mn (q4: q in 0..15, two per byte, see
    qmatmul.c; q5: the same with a fifth bit per weight in qh, mn None for -16 d; q8: int8 q, mn None).
    `source` is the GGUF type it came from, for the load log."""

    kind: str  # "q4" | "q5" | "q8"
    q: torch.Tensor  # q4, q5: uint8 [n, k / 2] (the low four bits); q8: int8 [n, k]
    d: torch.Tensor  # fp32 [n, k / 32]
    mn: torch.Tensor | None  # fp32 [n, k / 32] (q4; q5 from Q5_1)
    source: str
    qh: torch.Tensor | None = None  # q5: int32 [n, k / 32], bit j the fifth bit of the group's weight j
    # The same weight dequantized once, in bf16 and oneDNN's blocked layout, for long chunks on CPUs
    # that multiply bf16 natively (see models/linear.py `with_dense_copy`); None elsewhere.
    dense: torch.Tensor | None = None
    # Most rows served through our kernel once there is a dense copy (models/linear.py `kernel_rows`).
    copy_above_rows: int = 0

    @property
    def shape(self) -> tuple[int, int]:
        return self.d.shape[0], self.d.shape[1] * GROUP

    @property
    def nbytes(self) -> int:
        """Bytes of the quantized form (the bf16 copy not counted)."""
        return sum(t.numel() * t.element_size() for t in (self.q, self.qh, self.d, self.mn) if t is not None)


def _compile(sources: tuple[Path, ...], out: Path) -> None:
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler found (set CC)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        so = Path(tmp) / out.name
        flags = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC"]
        cmd = [cc, *flags, "-o", str(so), *map(str, sources), "-lm"]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        os.replace(so, out)


@cache
def compiled(source: Path, cache_dir: Path | None, *linked: Path) -> ctypes.CDLL | None:
    """`source` (one of our C kernels), with the kernels it calls (`linked`), compiled with -march=native
    into one library, cached under `cache_dir/kernels/` by sources and CPU flags; None with a logged
    warning where it cannot be built."""
    sources = (source, *linked)
    text = b"".join(s.read_bytes() for s in (*sources, HEADER)) + " ".join(sorted(cpu_flags())).encode()
    digest = hashlib.sha256(text)
    root = cache_dir if cache_dir is not None else Path(tempfile.gettempdir()) / "groundwork"
    so = root / "kernels" / f"{source.stem}-{digest.hexdigest()[:16]}.so"
    try:
        if not so.exists():
            log.info("compiling %s into %s", source.name, so)
            _compile(sources, so)
        return ctypes.CDLL(str(so))
    except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
        log.warning("C kernel %s unavailable (%s); the torch path serves instead", source.name, e)
        return None


@cache
def load_kernel(cache_dir: Path | None) -> ctypes.CDLL | None:
    """The quantized matmul kernel, or None where it cannot be built (GGUF weights are then dequantized
    to fp32)."""
    lib = compiled(SOURCE, cache_dir)
    if lib is None:
        return None
    global _LIB
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    lib.quantize_rows.argtypes = [p, i64, i64, p, p, p]
    lib.grid_rows.argtypes = [p, i64, i64, p, i32]
    lib.swiglu_grid_bf16.argtypes = [p, i64, i64, p]
    lib.mm_q4.argtypes = [p, p, p, i64, i64, p, p, p, p, i64, p, p, i32]
    lib.mm_q8.argtypes = [p, p, i64, i64, p, p, i64, p, p, i32]
    _LIB = lib
    return lib


_LIB: ctypes.CDLL | None = None  # the loaded kernel (one per process: its source and the CPU are fixed)


def activation_grid(x: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """fp32 `x` `[m, k]` rounded as the kernel quantizes activations (int8 per group of 32, scale
    max|x| / 127), in `dtype`: fp32 or bf16 (after `load_kernel`)."""
    lib = _LIB
    assert lib is not None and x.dtype == torch.float32 and dtype in (torch.float32, torch.bfloat16)
    x = x.contiguous()
    out = torch.empty(x.shape, dtype=dtype)
    lib.grid_rows(x.data_ptr(), x.shape[0], x.shape[1], out.data_ptr(), int(dtype == torch.bfloat16))
    return out


def swiglu_grid(gate_up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up of bf16 `gate_up` `[m, 2 i]` (gate first), on the activation grid in bf16 `[m, i]`
    (after `load_kernel`)."""
    lib = _LIB
    assert lib is not None and gate_up.dtype == torch.bfloat16
    gate_up = gate_up.contiguous()
    m, i = gate_up.shape[0], gate_up.shape[1] // 2
    out = torch.empty(m, i, dtype=torch.bfloat16)
    lib.swiglu_grid_bf16(gate_up.data_ptr(), m, i, out.data_ptr())
    return out


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def qlinear(x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`x @ w.T + bias` for fp32 `x` `[m, k]` on CPU (after `load_kernel`)."""
    lib = _LIB
    assert lib is not None, "load_kernel() first"
    x = x.contiguous()
    m, k = x.shape
    n = w.d.shape[0]
    groups = k // GROUP
    qx = torch.empty(m, k, dtype=torch.int8)
    dx, sx = torch.empty(m, groups), torch.empty(m, groups)
    lib.quantize_rows(x.data_ptr(), m, k, qx.data_ptr(), dx.data_ptr(), sx.data_ptr())
    y = torch.empty(m, n)
    threads = 1 if m * w.nbytes < PARALLEL_MIN_BYTES else torch.get_num_threads()
    if w.kind != "q8":
        lib.mm_q4(
            _ptr(qx),
            _ptr(dx),
            _ptr(sx),
            m,
            k,
            _ptr(w.q),
            _ptr(w.qh),
            _ptr(w.d),
            _ptr(w.mn),
            n,
            _ptr(bias),
            _ptr(y),
            threads,
        )
    else:
        lib.mm_q8(_ptr(qx), _ptr(dx), m, k, _ptr(w.q), _ptr(w.d), n, _ptr(bias), _ptr(y), threads)
    return y
