"""Continuous batching: a round's requests through `generate_batch` (paged cache); per-token timestamps
give each request's TTFT and inter-token gaps."""

from __future__ import annotations

import time
from typing import Any

from infertune.measure.core import Session
from infertune.measure.results import Finish


def run_round(s: Session, idx: list[int], seqs: list[list[int]], t0: float, timed: bool) -> float:
    """All requests of the round at once. Returns the time the last one finished."""
    from transformers.generation import ContinuousBatchingConfig, GenerationConfig

    wl, cfg, eos_ids = s.wl, s.m.cfg, s.eos_ids
    gcfg = GenerationConfig(
        max_new_tokens=wl.max_new_tokens,
        do_sample=wl.do_sample,
        pad_token_id=s.pad_id,
        eos_token_id=sorted(eos_ids) or None,
        min_new_tokens=wl.max_new_tokens if wl.ignore_eos else None,
    )
    cb = ContinuousBatchingConfig(
        max_batch_tokens=cfg.max_batch_tokens,
        num_blocks=cfg.cb_num_blocks,
        **_block_size_kwarg(ContinuousBatchingConfig, cfg.cb_block_size),
    )
    outs = s.m.model.generate_batch(
        inputs=seqs, generation_config=gcfg, continuous_batching_config=cb, record_timestamps=True, progress_bar=False
    )
    end = time.perf_counter()
    by_prompt: dict[tuple[int, ...], list] = {}
    for o in outs.values():
        by_prompt.setdefault(tuple(o.prompt_ids), []).append(o)
    for j, i in enumerate(idx):
        o = by_prompt[tuple(seqs[j])].pop(0)
        if o.error:
            raise RuntimeError(f"continuous batching request failed: {o.error}")
        ids = list(o.generated_tokens)
        stamps = list(o.timestamps or [])
        if timed and stamps:
            finish: Finish = "eos" if ids and ids[-1] in eos_ids and len(ids) < wl.max_new_tokens else "length"
            s.record(i, seqs[j], ids, stamps, t0, finish)
    return end


def _block_size_kwarg(cb_config: type, size: int | None) -> dict[str, Any]:
    """The KV block size under the name this transformers takes: `page_size` since 5.17, `block_size` before."""
    if size is None:
        return {}
    import inspect

    return {"page_size" if "page_size" in inspect.signature(cb_config).parameters else "block_size": size}
