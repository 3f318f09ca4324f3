"""Tensor parallel trials: one worker process per rank under torchrun; rank 0 speaks and writes the result."""

from __future__ import annotations

import os
from typing import Any

from infertune.core.config import InferenceConfig

RANK = int(os.environ.get("RANK", "0"))  # under torchrun (tensor parallel): this process's rank
WORLD = int(os.environ.get("WORLD_SIZE", "1"))


def rank_cuda_device() -> str:
    """This rank's own GPU (one device per rank), made current."""
    import torch

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    return f"cuda:{local}"


def resolved_plan(cfg: InferenceConfig, model_path: str) -> InferenceConfig:
    """'mlp': the MLP-only plan, as overrides of this model's own plan keys."""
    if cfg.tp_plan != "mlp":
        return cfg
    from infertune.probe.model import mlp_only_tp_plan

    return cfg.model_copy(update={"tp_plan": mlp_only_tp_plan(model_path, cfg.trust_remote_code)})


def gather_peaks(peak: int) -> list[int]:
    """Every rank's peak, on every rank (a collective: all ranks call it at the same point)."""
    import torch.distributed as dist

    peaks: list[Any] = [None] * WORLD
    dist.all_gather_object(peaks, peak)
    return [int(p) for p in peaks]
