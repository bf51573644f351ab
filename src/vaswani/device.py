"""Where a model runs and in what precision, chosen from the hardware rather than assumed.

`--device auto` takes a CUDA GPU, then Apple's MPS, then the CPU. `--precision auto` takes bf16
only where the hardware computes it natively, because elsewhere it is emulated and far slower than
fp32 (measured on a 2-core AVX2 EPYC: bf16 matmul 0.5 GFLOP/s against 29.8 in fp32; on an AVX512
Xeon without AVX512-BF16: 24 against 84):

    CUDA, compute capability >= 8.0 (A100, H100, RTX 30xx+)   bf16
    CUDA, older (V100, T4)                                     fp16, with a gradient scaler
    CPU with AVX512-BF16 or AMX, confirmed by a matmul probe   bf16
    anything else (AVX2 CPUs, MPS, ...)                        fp32

Every choice comes with the reason, which the commands print in one line at start.
`Hardware.detect()` reads the machine once; tests build a `Hardware` by hand to fake one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from vaswani.config import PRECISIONS
from vaswani.errors import VaswaniError

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# CPU flags (Linux /proc/cpuinfo names) of instructions that compute bf16 products natively.
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# oneDNN ISA limits below the one with bf16 instructions: with one of these in ONEDNN_MAX_CPU_ISA,
# oneDNN emulates bf16 even on a CPU that has the instructions.
ONEDNN_WITHOUT_BF16 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI")


class DeviceError(VaswaniError, ValueError):
    """A device or precision that this machine or this PyTorch build cannot provide."""


def _cpuinfo() -> tuple[str, frozenset[str]]:
    """The CPU's model name and feature flags as Linux names them; ("", {}) where /proc/cpuinfo
    does not exist."""
    name, flags = "", frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = (part.strip() for part in line.partition(":"))
                if key == "model name" and not name:
                    name = value
                elif key in ("flags", "Features") and not flags:
                    flags = frozenset(value.split())
    except OSError:
        pass
    return name, flags


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers and `taskset` set),
    not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Hardware:
    """What vaswani needs to know of a machine to choose a device and a precision."""

    cpu_capability: str
    """`torch.backends.cpu.get_cpu_capability()`: the widest vector ISA PyTorch's own kernels use
    (ATEN_CPU_CAPABILITY lowers it)."""
    cpu_flags: frozenset[str] = field(default_factory=frozenset)
    onednn_max_isa: str | None = None
    cuda: tuple[tuple[str, tuple[int, int]], ...] = ()
    """Each CUDA device's name and compute capability."""
    mps: bool = False
    cores: int = 1
    cpu_name: str = ""
    busy: float | None = None
    """Cores' worth of CPU time other processes take on this process's cores (`Load`); None:
    read when the thread count is chosen."""

    @classmethod
    def detect(cls) -> Hardware:
        cuda = ()
        if torch.cuda.is_available():
            cuda = tuple(
                (torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i))
                for i in range(torch.cuda.device_count())
            )
        mps = getattr(torch.backends, "mps", None)
        name, flags = _cpuinfo()
        return cls(
            cpu_capability=torch.backends.cpu.get_cpu_capability(),
            cpu_flags=flags,
            onednn_max_isa=os.environ.get("ONEDNN_MAX_CPU_ISA") or None,
            cuda=cuda,
            mps=bool(mps and mps.is_available()),
            cores=usable_cores(),
            cpu_name=name or platform.processor() or platform.machine(),
        )

    def cpu_bf16(self) -> tuple[bool, str]:
        """Whether this CPU has bf16 instructions PyTorch may use, and why (not yet probed)."""
        native = [flag for flag in CPU_BF16_FLAGS if flag in self.cpu_flags]
        # ARM: the "bf16" feature (e.g. Graviton3, Apple M2); the probe decides if it pays.
        if "bf16" in self.cpu_flags and self.cpu_capability.startswith("SVE"):
            native.append("bf16")
        if not native:
            return False, f"this CPU has no native bf16, {self.cpu_capability}"
        if not self.cpu_capability.startswith(("AVX512", "SVE")):
            return False, (
                f"PyTorch runs this CPU at {self.cpu_capability} (ATEN_CPU_CAPABILITY?), "
                "without its bf16 instructions"
            )
        if (self.onednn_max_isa or "").upper() in ONEDNN_WITHOUT_BF16:
            return False, f"ONEDNN_MAX_CPU_ISA={self.onednn_max_isa} leaves out bf16 instructions"
        return True, f"this CPU computes bf16 natively ({', '.join(native)})"


@functools.lru_cache(maxsize=1)
def bf16_matmul_is_fast() -> bool:
    """A few-millisecond probe: is a bf16 matmul on this CPU at least as fast as an fp32 one?
    Confirms the flags, which cannot tell whether this PyTorch build's kernels use them."""

    def best_of(dtype: torch.dtype) -> float:
        a = torch.randn(256, 256).to(dtype)
        a @ a  # the first call may pick and initialise a kernel
        times = []
        for _ in range(3):
            start = time.perf_counter()
            a @ a
            times.append(time.perf_counter() - start)
        return min(times)

    return best_of(torch.bfloat16) <= best_of(torch.float32)


def pick_device(name: str = "auto", hw: Hardware | None = None) -> tuple[torch.device, str]:
    """The device `name` asks for ("auto", "cpu", "cuda", "cuda:1", "mps"), and why it was chosen.
    Raises DeviceError for one this machine or this PyTorch build does not have."""
    if name == "auto":
        hw = hw or Hardware.detect()
        if hw.cuda:
            return torch.device("cuda"), f"auto: {hw.cuda[0][0]}"
        if hw.mps:
            return torch.device("mps"), "auto: Apple GPU (MPS), no CUDA device"
        return torch.device("cpu"), "auto: no CUDA or MPS device"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise DeviceError(
            f"--device {name!r} is not a device name; use auto, cpu, cuda, cuda:N or mps"
        ) from None
    if device.type not in ("cpu", "cuda", "mps"):
        raise DeviceError(f"--device {name}: vaswani runs on cpu, cuda or mps; use one of them")
    hw = hw or Hardware.detect()
    if device.type == "cuda":
        if not hw.cuda:
            raise DeviceError(f"--device {name}: no CUDA device is available; use --device cpu")
        if device.index is not None and device.index >= len(hw.cuda):
            raise DeviceError(
                f"--device {name}: this machine has {len(hw.cuda)} CUDA device(s), "
                f"cuda:0 .. cuda:{len(hw.cuda) - 1}"
            )
    if device.type == "mps" and not hw.mps:
        raise DeviceError(f"--device {name}: MPS (Apple GPU) is not available; use --device cpu")
    return device, "as asked"


def pick_precision(
    name: str,
    device: torch.device,
    hw: Hardware | None = None,
    probe: Callable[[], bool] | None = None,
) -> tuple[str, str]:
    """The precision `name` asks for on `device` ("auto" resolved by the table at the top of this
    module), and why. `probe` confirms a CPU's bf16 flags by timing (replaced in tests)."""
    if name not in PRECISIONS:
        raise DeviceError(f"--precision {name!r}: choose one of {', '.join(PRECISIONS)}")
    if name != "auto":
        return name, "as asked"
    hw = hw or Hardware.detect()
    if device.type == "cuda":
        index = device.index or 0
        gpu, (major, minor) = hw.cuda[index]
        if major >= 8:
            return "bf16", f"auto: {gpu} computes bf16 (compute capability {major}.{minor})"
        return "fp16", (
            f"auto: {gpu} has no fast bf16 (compute capability {major}.{minor} < 8.0); "
            "fp16 with loss scaling"
        )
    if device.type == "cpu":
        native, reason = hw.cpu_bf16()
        if not native:
            return "fp32", f"auto: {reason}"
        if not (probe or bf16_matmul_is_fast)():
            return "fp32", f"auto: {reason}, but a bf16 matmul was slower than fp32 here"
        return "bf16", f"auto: {reason}"
    return "fp32", f"auto: {device.type} runs fp32 (autocast there is not measured faster)"


def set_threads(
    world_size: int = 1, hw: Hardware | None = None, asked: int | None = None
) -> tuple[int, str]:
    """Give PyTorch the `asked` threads, or the cores this process may use (shared among
    `world_size` processes of one machine) less those other processes keep busy, unless the user
    set OMP_NUM_THREADS; returns the count and where it came from. A thread on a core another
    process holds makes every other thread wait for it at each step (~10x slower)."""
    if asked is not None:
        torch.set_num_threads(asked)
        return asked, "as asked"
    if os.environ.get("OMP_NUM_THREADS"):
        return torch.get_num_threads(), "OMP_NUM_THREADS"
    hw = hw or Hardware.detect()
    threads = max(1, hw.cores // max(world_size, 1))
    why = f"the {hw.cores} cores this process may use"
    if world_size > 1:
        why += f" shared by {world_size} processes"
    else:
        busy = hw.busy if hw.busy is not None else Load.read().busy
        if busy >= BUSY:
            threads = max(1, hw.cores - round(busy))
            why += f", {busy:.1f} of them busy with other processes"
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads, why


BUSY = 0.5
"""Cores' worth of other processes' work from which a core is left to them."""


@dataclass(frozen=True)
class Load:
    """What other processes do on this process's cores, read from Linux's /proc/stat over
    `seconds` (this process sleeps meanwhile, so what is counted is theirs): `busy`, in cores'
    worth (1.0: one core fully taken); `steal`, the share of time the hypervisor gave to other
    machines (None where the kernel does not say); zeros where /proc/stat is absent."""

    busy: float = 0.0
    steal: float | None = None
    seconds: float = 0.0

    @classmethod
    def read(cls, seconds: float = 0.1) -> Load:
        before = _cpu_times()
        if not before:
            return cls()
        time.sleep(seconds)
        after = _cpu_times()
        busy, stolen, total = 0.0, 0, 0
        for cpu in set(before) & set(after) & _affinity():
            spent = [b - a for a, b in zip(before[cpu], after[cpu], strict=False)]
            elapsed = sum(spent[:8])  # user nice system idle iowait irq softirq steal
            if elapsed > 0:
                busy += 1 - (spent[3] + spent[4]) / elapsed
                stolen, total = stolen + (spent[7] if len(spent) > 7 else 0), total + elapsed
        return cls(round(busy, 2), stolen / total if total else None, seconds)


def _cpu_times() -> dict[int, list[int]]:
    """Each CPU's time counters from /proc/stat (empty where there is none)."""
    try:
        with open("/proc/stat") as stat:
            return _parsed(stat.read())
    except (OSError, ValueError):
        return {}


def _parsed(stat: str) -> dict[int, list[int]]:
    return {
        int(line.split()[0][3:]): [int(n) for n in line.split()[1:]]
        for line in stat.splitlines()
        if line.startswith("cpu") and line[3:4].isdigit()
    }


def _affinity() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


@dataclass(frozen=True)
class Placement:
    """A resolved device and precision, with the reasons for each (printed at start)."""

    device: torch.device
    precision: str
    device_reason: str = "as asked"
    precision_reason: str = "as asked"
    threads: int = 1
    threads_reason: str = ""

    def autocast(self) -> contextlib.AbstractContextManager:
        return autocast(self.device, self.precision)

    def lines(self) -> list[str]:
        """The choice in words, e.g. `precision: fp32 (auto: this CPU has no native bf16, AVX2)`."""
        device = f"device: {self.device} ({self.device_reason})"
        if self.device.type == "cpu":
            device += f", {self.threads} threads ({self.threads_reason})"
        return [device, f"precision: {self.precision} ({self.precision_reason})"]

    def to_dict(self) -> dict[str, object]:
        return {
            "device": str(self.device),
            "device_reason": self.device_reason,
            "precision": self.precision,
            "precision_reason": self.precision_reason,
            "threads": self.threads,
        }


def machine_name(device: torch.device, hw: Hardware | None = None) -> str:
    """The machine a run computes on, for comparing runs: the GPU's name, or the CPU's with its
    vector ISA and the cores used (`AMD EPYC, AVX2, 2 cores`)."""
    hw = hw or Hardware.detect()
    if device.type == "cuda" and hw.cuda:
        return hw.cuda[device.index or 0][0]
    if device.type == "mps":
        return f"Apple {platform.machine()} (MPS)"
    return f"{hw.cpu_name}, {hw.cpu_capability}, {hw.cores} cores"


def place(
    device: str = "auto",
    precision: str = "auto",
    world_size: int = 1,
    hw: Hardware | None = None,
    threads: int | None = None,
) -> Placement:
    """Resolve `--device` and `--precision` (and set the thread count, `threads` if given) for
    this process."""
    hw = hw or Hardware.detect()
    where, where_reason = pick_device(device, hw)
    how, how_reason = pick_precision(precision, where, hw)
    threads, threads_reason = set_threads(world_size, hw, threads)
    if where.type == "cuda":
        steady_attention()
    return Placement(where, how, where_reason, how_reason, threads, threads_reason)


def steady_attention() -> None:
    """Leave cuDNN's kernel out of `scaled_dot_product_attention` on CUDA (the flash and
    memory-efficient kernels remain). cuDNN builds a graph for each new shape, and batches of
    sentences come in a new shape nearly every step."""
    torch.backends.cuda.enable_cudnn_sdp(False)


# glibc's mallopt(3) parameters, and the largest mmap threshold it accepts on 64-bit Linux.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_MAX = 32 << 20


def glibc() -> bool:
    """Whether this process allocates with GNU libc's malloc (Linux, not musl)."""
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def keep_freed_memory() -> bool:
    """Have glibc's allocator keep the memory a CPU training step frees, for the next step.

    glibc serves blocks above an adaptive threshold (128 KB at first) by fresh mmap(2)s and gives
    the top of its heap back to the system as it frees, so a step may page-fault the same memory
    in again every time: 18,000 minor faults per step of the mini preset on 2 cores (AMD EPYC
    Zen 4). With blocks up to 32 MB from a heap that is never trimmed: 300. Measured there: the
    step alone 8-15% faster (bf16 177 -> 153 ms; fp32 268 -> 247, emulated AVX2 fp32 266 -> 226);
    `vaswani train --max-steps 150` on ding 8% faster (three runs each); with `--max-minutes 1`,
    whose updates page-faulted less to begin with (4,200 times each against 14,000), no
    difference beyond the host's drift. The process keeps its peak heap until it ends, which suits
    a training run. Returns whether the allocator took the setting."""
    if not glibc():
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no C library to be found in this process
        return False
    # mallopt returns 1 on success; a trim threshold of -1 turns trimming off (mallopt(3)).
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) and mallopt(M_TRIM_THRESHOLD, -1))


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """Autocast to bf16 or fp16 on `device`; a no-op context for fp32."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=DTYPES[precision])


def grad_scaler(device: torch.device, precision: str) -> torch.amp.GradScaler:
    """fp16 training's loss scaler (fp16's narrow range underflows small gradients without it);
    disabled, and then a no-op, for bf16 and fp32."""
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")


def environment(hw: Hardware | None = None) -> dict[str, object]:
    """The hardware and software as vaswani sees it, and what `auto` picks (`vaswani env`)."""
    from vaswani import __version__

    hw = hw or Hardware.detect()
    load = Load.read(0.5) if hw.busy is None else Load(hw.busy)  # the load seen, over half a second
    placement = place(hw=dataclasses.replace(hw, busy=load.busy))
    native, reason = hw.cpu_bf16()
    cuda_versions = {"cuda": torch.version.cuda} if torch.version.cuda else {}
    return {
        "vaswani": __version__,
        "torch": torch.__version__,
        **cuda_versions,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": hw.cpu_name,
        "cpu_capability": hw.cpu_capability,
        "cpu_bf16_flags": sorted(set(CPU_BF16_FLAGS + ("bf16",)) & hw.cpu_flags),
        "cpu_bf16": reason,
        "cpu_bf16_probe_fast": bf16_matmul_is_fast() if native else None,
        "cores_usable": hw.cores,
        "cores_machine": os.cpu_count(),
        "cores_busy": load.busy,
        "cpu_steal": "not exposed" if load.steal is None else f"{load.steal:.1%}",
        "cuda_devices": [
            {"name": name, "compute_capability": f"{major}.{minor}", "bf16": major >= 8}
            for name, (major, minor) in hw.cuda
        ],
        "mps": hw.mps,
        "auto": placement.to_dict() | {"threads_reason": placement.threads_reason},
    }


def benchmark_setting(device: str = "cpu") -> tuple[str, list[str]]:
    """For benchmarks: one line naming what the figures depend on (CPU capability, threads,
    what `auto` picks and why), and the precisions to measure: fp32 and the auto choice."""
    where, _ = pick_device(device)
    auto, reason = pick_precision("auto", where)
    line = (
        f"device {where}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}; "
        f"precision auto = {auto} ({reason})"
    )
    return line, sorted({"fp32", auto}, key=["fp32", "bf16", "fp16"].index)
