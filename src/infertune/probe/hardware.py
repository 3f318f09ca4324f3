"""CPU, RAM and accelerators of this machine.

GPU facts come from torch's own view of the devices (the numbering trials use), so the device index in
a report is the one `cuda:N` means. Probing CUDA creates a context (~hundreds of MiB of GPU memory), so
the trial runner probes inside the child, never in the long-lived parent.
"""

from __future__ import annotations

import os
import platform
from typing import Any

from pydantic import BaseModel

from infertune.probe.host import cpu_model_name, no_gpu_driver


class GPU(BaseModel):
    index: int
    name: str
    total_memory_bytes: int
    free_memory_bytes: int | None
    compute_capability: str
    bf16: bool
    uuid: str | None = None


class Hardware(BaseModel):
    platform: str
    cpu_model: str
    cpu_logical_cores: int
    cpu_physical_cores: int | None
    ram_total_bytes: int
    ram_available_bytes: int
    gpus: list[GPU]
    mps: bool

    @property
    def accelerator(self) -> str:
        return "cuda" if self.gpus else ("mps" if self.mps else "cpu")


def _cpu_model() -> str:
    return cpu_model_name() or platform.processor() or platform.machine()


def detect_gpus(cuda: Any = None) -> list[GPU]:
    """CUDA devices as torch sees them. `cuda` defaults to `torch.cuda`; tests inject a stand-in."""
    if cuda is None:
        if no_gpu_driver():
            return []
        import torch

        cuda = torch.cuda
    if not cuda.is_available():
        return []
    gpus = []
    for i in range(cuda.device_count()):
        props = cuda.get_device_properties(i)
        try:
            free, _total = cuda.mem_get_info(i)
        except Exception:  # a device that is busy or in an exclusive mode still has a name and size
            free = None
        major, minor = props.major, props.minor
        uuid = getattr(props, "uuid", None)
        gpus.append(
            GPU(
                index=i,
                name=props.name,
                total_memory_bytes=int(props.total_memory),
                free_memory_bytes=None if free is None else int(free),
                compute_capability=f"{major}.{minor}",
                # bf16 tensor cores arrive with Ampere (8.0); earlier cards emulate it slowly or not at all.
                bf16=major >= 8,
                uuid=str(uuid) if uuid is not None else None,
            )
        )
    return gpus


def _mps_available() -> bool:
    import torch

    backend = getattr(torch.backends, "mps", None)
    return bool(backend and backend.is_available())


def total_ram_bytes() -> int:
    """Physical memory, as `psutil.virtual_memory().total` gives it, read without importing psutil where the
    OS answers it directly (a warm estimate keys its cached CPU probe on it)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        import psutil

        return psutil.virtual_memory().total


def detect_hardware(cuda: Any = None) -> Hardware:
    import psutil

    vm = psutil.virtual_memory()
    return Hardware(
        platform=f"{platform.system()} {platform.machine()}",
        cpu_model=_cpu_model(),
        cpu_logical_cores=os.cpu_count() or 1,
        cpu_physical_cores=psutil.cpu_count(logical=False),
        ram_total_bytes=vm.total,
        ram_available_bytes=vm.available,
        gpus=detect_gpus(cuda),
        mps=_mps_available(),
    )
