"""The current placement as stated: device_map="auto" (or balanced, sequential) over weights that do not fit the
GPUs is accelerate filling them and offloading the rest to CPU RAM, not a model that does not load. The user who
says --device-map auto runs that, so the estimate of the current setup is that placement's (offloaded layers
streamed over the host link at every step), with the target's RAM as the CPU budget."""

from __future__ import annotations

from infertune.estimate.placement import DEFAULT_GPU_BUDGET
from infertune.techniques.base import Facts, Setup
from infertune.techniques.render import estimate_setup

GiB = 2**30
SPREAD_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")  # accelerate's strategies over every device


def accelerate_budgets(f: Facts) -> dict[str, str]:
    """accelerate's own max_memory for device_map="auto" (estimate/placement.py's defaults): one GPU at 90 %,
    several at all of their memory, then the target's CPU RAM."""
    share = DEFAULT_GPU_BUDGET if f.gpus == 1 else 1.0
    gib = int(f.accelerator.memory_bytes * share / GiB)
    mm = {str(i): f"{gib}GiB" for i in range(f.gpus)}
    mm["cpu"] = f"{int((f.cpu_ram_bytes or 0) / GiB)}GiB"
    return mm


def offloaded_as_stated(f: Facts, s: Setup, stated_map: str | None) -> tuple[Setup, str | None]:
    """The current setup with accelerate's budgets where a spread device_map was stated over GPUs the weights do
    not fit (and the target's RAM is known); with the assumption it adds. Otherwise the setup as it was."""
    if stated_map not in SPREAD_MAPS or s.max_memory or s.tp != 1 or f.platform != "cuda" or not f.cpu_ram_bytes:
        return s, None
    weights = estimate_setup(f, s, input_len=1, max_new_tokens=1, batch=1, concurrency=1).tightest()
    if weights is None or weights.fits:
        return s, None
    after = s.model_copy(update={"device_map": "auto", "max_memory": accelerate_budgets(f)})
    note = (
        f"device_map={stated_map}: the weights do not fit the GPU memory, so accelerate fills "
        f"{'each GPU' if f.gpus > 1 else 'the GPU'} and offloads the rest to CPU RAM "
        f"({f.cpu_ram_bytes / GiB:.0f} GiB): the current setup is estimated so, offloaded layers streamed every step"
    )
    return after, note
