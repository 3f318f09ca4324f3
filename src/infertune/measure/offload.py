"""device_map trials: what landed where, and what each decoder layer's forward costs by where it lives."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from infertune.measure.results import device_of


class LayerTimer:
    """Wall time of each decoder layer's forward, grouped by where the layer's weights live (device_map).

    Hooks on the layer modules wrap accelerate's own hook, so an offloaded layer's time includes bringing
    its weights back from CPU RAM or disk. On CUDA, events on the stream time the layers without forcing a
    synchronisation at every layer (which would change what is measured)."""

    def __init__(self, model: Any, where: dict[str, str], cuda: bool) -> None:
        """`where`: the loaded model's hf_device_map (module prefix -> device)."""
        import re

        import torch

        self.samples: dict[str, list[Any]] = {}
        self.cuda = cuda
        for name, module in model.named_modules():
            if not re.search(r"\.layers\.\d+$", name):
                continue
            dev = device_of(where, name)
            if dev is None:
                continue
            calls = self.samples.setdefault(dev, [])

            def pre(mod: Any, args: Any, calls: list = calls) -> None:
                if cuda:
                    ev = torch.cuda.Event(enable_timing=True)
                    ev.record()
                    calls.append([ev, None])
                else:
                    calls.append([time.perf_counter(), None])

            def post(mod: Any, args: Any, out: Any, calls: list = calls) -> None:
                if cuda:
                    ev = torch.cuda.Event(enable_timing=True)
                    ev.record()
                    calls[-1][1] = ev
                else:
                    calls[-1][1] = time.perf_counter()

            module.register_forward_pre_hook(pre)
            module.register_forward_hook(post)

    def times(self) -> dict[str, list[float]]:
        """Seconds per layer forward, by the device its weights live on."""
        import torch

        if self.cuda:
            torch.cuda.synchronize()
        return {
            dev: [a.elapsed_time(b) / 1e3 if self.cuda else b - a for a, b in calls if b is not None]
            for dev, calls in self.samples.items()
        }


def layer_timing(times: dict[str, list[float]], compute: str) -> tuple[dict[str, float], float | None]:
    """Median layer forward per device, and the offload slowdown: the median forward of layers whose
    weights live off the compute devices (CPU RAM beside a GPU, or disk) over the median of resident
    layers (None when nothing is offloaded, or nothing resident)."""
    medians = {dev: float(np.median(t)) for dev, t in times.items() if t}
    on = [x for dev, t in times.items() if dev == compute or dev.startswith("cuda") for x in t]
    off = [x for dev, t in times.items() if not (dev == compute or dev.startswith("cuda")) for x in t]
    return medians, float(np.median(off) / np.median(on)) if on and off else None
