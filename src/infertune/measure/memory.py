"""Peak-memory meters for a trial's phases (load, then generation).

CPU: torch has no CPU allocator statistics, so we count the process's resident set, and only the trial
process's own: `ru_maxrss` is NOT used, because Linux carries it across fork+exec (a worker started by a
parent that once peaked at 1.5 GB reports 1.5 GB from its first instruction). `VmHWM` in /proc/self/status
belongs to the address space, which exec replaces, so it starts afresh in the worker; we also reset it when
the meter starts and again when generation starts (`echo 5 > /proc/self/clear_refs`, Linux >= 4.0), which
counts transients of any length (eager attention scores live for milliseconds). Where there is no VmHWM,
a 2 ms RSS sampler runs for the process's life and stands in (it can miss such short transients).
CUDA: torch's allocator counters, which count what tensors hold; the reserved peak (allocator cache) is
reported beside them.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Literal

import psutil


class RssSampler:
    """Max RSS seen while active; a context manager around one phase."""

    def __init__(self, interval_s: float = 0.002):
        self.interval_s = interval_s
        self.peak = 0
        self._proc = psutil.Process()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        self.peak = max(self.peak, self._proc.memory_info().rss)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> RssSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def vm_hwm(pid: int | str = "self") -> int:
    """A process's resident-memory high-water mark, from the kernel (Linux); OSError where there is none."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise OSError(f"no VmHWM in /proc/{pid}/status")


Method = Literal["vmhwm", "rss_sampler", "cuda_max_allocated"]
MemoryKind = Literal["cpu_rss", "cuda_allocated"]


def reset_hwm() -> bool:
    """Reset this process's VmHWM to its current RSS (Linux >= 4.0); False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class HwmPhase:
    """The kernel's exact peak RSS over one phase: VmHWM reset on entry, read on exit (Linux >= 4.0)."""

    def __init__(self, own: OwnPeak | None = None) -> None:
        self.peak = 0
        self.own = own

    @staticmethod
    def available() -> bool:
        try:
            vm_hwm()
        except OSError:
            return False
        return reset_hwm()

    def __enter__(self) -> HwmPhase:
        if self.own is not None:  # keep what came before: the reset forgets it
            self.own.before = self.own.read()
        reset_hwm()
        return self

    def __exit__(self, *exc: object) -> None:
        self.peak = vm_hwm()


class OwnPeak:
    """This process's own peak RSS, never inherited from its parent: VmHWM (reset at the start where the
    kernel allows), or, where there is none, a 2 ms sampler running for the rest of the process's life."""

    def __init__(self) -> None:
        try:
            vm_hwm()
            self.method: Method = "vmhwm"
        except OSError:
            self.method = "rss_sampler"
        self.before = 0  # the peak from before the last VmHWM reset
        self.resettable = self.method == "vmhwm" and reset_hwm()
        self._sampler = RssSampler().__enter__() if self.method == "rss_sampler" else None

    def read(self) -> int:
        if self._sampler is not None:
            self._sampler._sample()
            return self._sampler.peak
        return max(self.before, vm_hwm())

    def phase(self) -> HwmPhase | RssSampler:
        """A meter for one phase: exact where VmHWM can be reset, sampled elsewhere."""
        return HwmPhase(self) if self.resettable else RssSampler()


class CpuMeter:
    kind: MemoryKind = "cpu_rss"

    def __init__(self) -> None:
        self.own = OwnPeak()
        self.method: Method = self.own.method

    def current(self) -> int:
        return psutil.Process().memory_info().rss

    def load_peak(self) -> int:
        return self.own.read()

    def generate_phase(self) -> HwmPhase | RssSampler:
        return self.own.phase()

    def reserved_peak(self) -> int | None:
        return None

    def process_peak(self) -> int:
        """The process's own peak RSS so far (every phase)."""
        return self.own.read()


def nvml_used(uuid: str | None, index: int, pid: int, nvml: Any = None) -> tuple[int | None, int | None]:
    """(this process's memory on the GPU, the GPU's total used) as NVML (nvidia-smi) counts them: CUDA
    context and library modules included. The device is found by UUID (torch and NVML may number devices
    differently); (None, None) without nvidia-ml-py or when NVML cannot be read."""
    if nvml is None:
        try:
            import pynvml  # the nvidia-ml-py distribution
        except ImportError:
            return None, None
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except Exception:
        return None, None
    try:
        if uuid:
            handle = nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}")
        else:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        total_used = int(nvml.nvmlDeviceGetMemoryInfo(handle).used)
        mine = next(
            (
                int(p.usedGpuMemory)
                for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)
                if p.pid == pid and p.usedGpuMemory
            ),
            None,
        )
        return mine, total_used
    except Exception:
        return None, None
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


class CudaMeter:
    """`cuda` is `torch.cuda` (tests inject a stand-in with the same functions), `nvml` the pynvml module."""

    kind: MemoryKind = "cuda_allocated"
    method: Method = "cuda_max_allocated"

    def __init__(self, device: Any, cuda: Any = None, nvml: Any = None):
        if cuda is None:
            import torch

            cuda = torch.cuda
        self.cuda, self.device, self.nvml = cuda, device, nvml
        self._reserved = 0
        self.own = OwnPeak()  # host memory (offloaded weights, pinned buffers) is never reset here
        self.process_used: int | None = None  # NVML, at the end of generation (context included)
        self.device_used: int | None = None

    def sample_nvml(self) -> None:
        import os

        index = int(str(self.device).partition(":")[2] or 0)
        try:
            uuid = getattr(self.cuda.get_device_properties(index), "uuid", None)
        except Exception:
            uuid = None
        mine, used = nvml_used(str(uuid) if uuid is not None else None, index, os.getpid(), self.nvml)
        self.process_used = max(self.process_used or 0, mine or 0) or None
        self.device_used = max(self.device_used or 0, used or 0) or None

    def current(self) -> int:
        return int(self.cuda.memory_allocated(self.device))

    def load_peak(self) -> int:
        self.cuda.synchronize(self.device)
        self._reserved = int(self.cuda.max_memory_reserved(self.device))
        return int(self.cuda.max_memory_allocated(self.device))

    def generate_phase(self) -> _CudaPhase:
        return _CudaPhase(self)

    def reserved_peak(self) -> int | None:
        return self._reserved

    def process_peak(self) -> int:
        return self.own.read()


class _CudaPhase:
    def __init__(self, meter: CudaMeter):
        self.meter, self.peak = meter, 0

    def __enter__(self) -> _CudaPhase:
        self.meter.cuda.synchronize(self.meter.device)
        self.meter.cuda.reset_peak_memory_stats(self.meter.device)
        return self

    def __exit__(self, *exc: object) -> None:
        m = self.meter
        m.cuda.synchronize(m.device)
        self.peak = int(m.cuda.max_memory_allocated(m.device))
        m._reserved = max(m._reserved, int(m.cuda.max_memory_reserved(m.device)))
        m.sample_nvml()  # the allocator keeps its reserve until empty_cache: NVML now sees the phase's high point


def meter_for(device: str) -> CpuMeter | CudaMeter:
    if device.startswith("cuda"):
        return CudaMeter(device)
    return CpuMeter()  # MPS: the unified-memory RSS is the honest number we can read here
