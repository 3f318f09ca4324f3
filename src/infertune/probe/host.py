"""What identifies this host, read from the operating system without importing torch or pydantic.

The warm paths (a cached calibration's key, a kept answer in `infertune.cli.answers`) ask these on every
call, so each is a file read or two.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

GPU_DRIVER_PATHS = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd")


def cpu_model_name() -> str:
    """The CPU's model name from /proc/cpuinfo ("" where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        return ""


def no_gpu_driver() -> bool:
    """True when this host certainly has no CUDA/ROCm device (Linux without the NVIDIA or AMD kernel
    driver, or macOS): then torch need not be imported (~3 s) to learn that."""
    if sys.platform == "darwin":
        return True
    if sys.platform != "linux":
        return False
    return not any(os.path.exists(p) for p in GPU_DRIVER_PATHS)


def host_fingerprint(device: str = "cpu") -> str:
    """What decides the calibration's host key, read without importing torch: the CPU, the CPUs this process
    may use, the thread variables torch reads at start-up and torch's installed version file (a reinstall
    rewrites it)."""
    from infertune.probe.versions import torch_version_file

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = ",".join(os.environ.get(v, "") for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"))
    return f"{device}|{cpu_model_name()}|cpus={os.cpu_count()}/{cpus}|env={threads}|{torch_version_file()}"


def nvidia_gpus() -> str:
    """The NVIDIA driver's description of each GPU (model, bus, serial), "" without the driver."""
    gpus = Path("/proc/driver/nvidia/gpus")
    try:
        return "\n".join(
            (d / "information").read_text(encoding="utf-8", errors="replace") for d in sorted(gpus.iterdir())
        )
    except OSError:
        return ""


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo does not exist)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def native_cpu_dtypes(flags: set[str]) -> dict[str, bool]:
    """Which half types the CPU computes natively: bf16 with AVX512-BF16 or AMX-BF16 (x86) or the ARM bf16
    extension; fp16 with AVX512-FP16 or AMX-FP16 (x86) or ARM's half-precision arithmetic (asimdhp)."""
    return {
        "bfloat16": bool(flags & {"avx512_bf16", "amx_bf16", "bf16"}),
        "float16": bool(flags & {"avx512_fp16", "amx_fp16", "asimdhp"}),
    }


def release_freed_memory() -> bool:
    """Hand the C heap's freed pages back to the OS (glibc `malloc_trim(0)`); False where there is no glibc.

    A fresh process writes its large transient tensors (eager attention's score matrices) into pages it touches
    for the first time, and pays the page faults; a process whose heap already holds freed pages reuses them and
    does not. On the development CPU one sequence of bf16 eager prefill attention ran at 62-69 GFLOP/s in a fresh
    process and at 109-218 after a model had been loaded and freed; trimmed before each call, 61-70 again."""
    import ctypes

    try:  # the process's own symbols: libc is loaded already, no library search (find_library runs a subprocess)
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        return False
    return True
