"""How close is the memory estimate to a measured peak? Side by side, in one run, on this machine.

For each cell (dtype x attention x cache x batch x input length) it measures the generation-phase peak
above the process baseline with the real trial runner (a fresh child per cell), and prints it next to
infertune's estimate and a weights-only estimate (what accelerate/hf-mem-style calculators report).

    .venv/bin/python benchmarks/estimate_accuracy.py            # quick matrix, 18 cells (~30 min on 2 cores)
    .venv/bin/python benchmarks/estimate_accuracy.py --full     # the whole 48-cell matrix (hours)

Two measured columns per cell. `rss` is the child's resident set with glibc's default allocator, what a
user's process shows; glibc keeps freed blocks below its dynamic mmap threshold (up to 32 MiB) in the
heap, so after large transients RSS stays above the live tensors. `exact` runs the same cell with
MALLOC_MMAP_THRESHOLD_=131072, so every large tensor is its own mapping and is returned when freed:
RSS then follows the live tensor bytes, the CPU analogue of CUDA's max_memory_allocated (which is what
trials report on CUDA). The estimate predicts tensor bytes, so its target is set on `exact`.

What CPU numbers can say about CUDA: the formulas for weights, KV cache, eager attention scores and
activations are device-independent tensor sizes, so agreement here checks them. What they cannot check:
the CUDA context and caching-allocator slack (named constants in estimate/memory.py), and the CPU-only
runtime constant (CPU_RUNTIME_BYTES) which has no CUDA counterpart in torch's allocated counter.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
from pathlib import Path

from infertune.core.config import InferenceConfig
from infertune.core.workload import Workload
from infertune.estimate.memory import EstimateSettings, estimate_memory
from infertune.measure import run_trial
from infertune.models import store
from infertune.probe.model import profile_model

MiB = 2**20


def cells(full: bool):
    """The quick matrix covers every axis at least once; --full is the whole product (hours on 2 cores:
    bf16 matmuls without native bf16 support are slow, eager attention at 4k is quadratic)."""
    if full:
        yield from itertools.product(
            ["float32", "bfloat16"], ["eager", "sdpa"], ["dynamic", "static"], [1, 4], [128, 1024, 4096]
        )
        return
    yield from itertools.product(["float32"], ["eager", "sdpa"], ["dynamic"], [1, 4], [128, 1024])
    yield from itertools.product(["bfloat16"], ["eager", "sdpa"], ["dynamic"], [1], [128, 1024])
    yield from [
        ("float32", "sdpa", "static", 1, 128),
        ("float32", "sdpa", "static", 4, 1024),
        ("bfloat16", "sdpa", "static", 1, 1024),
        ("bfloat16", "sdpa", "dynamic", 4, 128),
        ("float32", "sdpa", "dynamic", 1, 4096),
        ("float32", "eager", "dynamic", 1, 4096),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="the whole matrix, 4k inputs included")
    ap.add_argument("--new-tokens", type=int, default=8)
    ap.add_argument("--json", type=Path, help="also write every cell here")
    args = ap.parse_args()

    path = store.resolve("demo")
    prof = profile_model(path)
    rows = []
    print(
        f"{'dtype':9} {'attn':6} {'cache':8} {'batch':>5} {'input':>6} | {'estimate':>9} | {'exact':>7} {'err':>7} |"
        f" {'rss':>7} {'err':>7} | {'weights-only err (exact)':>24}"
    )
    for dtype, attn, cache, batch, n in cells(args.full):
        cfg = InferenceConfig(
            dtype=dtype, attn_implementation=attn, cache_implementation=None if cache == "dynamic" else cache
        )
        wl = Workload(
            model=str(path),
            prompts=["Tell me about the sea."],
            input_len=n,
            batch=batch,
            max_new_tokens=args.new_tokens,
            ignore_eos=True,
            warmup=0,
            repeats=1,
        )
        measured = {}
        for mode in ("rss", "exact"):
            if mode == "exact":
                os.environ["MALLOC_MMAP_THRESHOLD_"] = "131072"  # inherited by the trial's child only
            try:
                r = run_trial(cfg, wl, path, timeout_s=1800)
            finally:
                os.environ.pop("MALLOC_MMAP_THRESHOLD_", None)
            if r.status == "ok":
                measured[mode] = r.metrics.peak_memory_generate_bytes - r.metrics.baseline_memory_bytes
        if len(measured) < 2:
            print(f"{dtype:9} {attn:6} {cache:8} {batch:>5} {n:>6} | trial {r.status}: {r.error}")
            continue
        s = EstimateSettings(
            dtype=dtype,
            attn=attn,
            kv_cache=cache,
            input_len=n,
            max_new_tokens=args.new_tokens,
            batch=batch,
            platform="cpu",
        )
        est = estimate_memory(prof, s, prof.native_dtype)
        err = {k: (est.total_bytes - v) / v for k, v in measured.items()}
        werr = (est.weights_bytes - measured["exact"]) / measured["exact"]
        rows.append(
            {
                "dtype": dtype,
                "attn": attn,
                "cache": cache,
                "batch": batch,
                "input_len": n,
                "estimate_bytes": est.total_bytes,
                "measured_exact_bytes": measured["exact"],
                "measured_rss_bytes": measured["rss"],
                "error": err["exact"],
                "error_rss": err["rss"],
                "weights_only_bytes": est.weights_bytes,
                "weights_only_error": werr,
            }
        )
        print(
            f"{dtype:9} {attn:6} {cache:8} {batch:>5} {n:>6} | {est.total_bytes / MiB:8.0f}M | "
            f"{measured['exact'] / MiB:6.0f}M {err['exact']:+7.1%} | {measured['rss'] / MiB:6.0f}M {err['rss']:+7.1%} |"
            f" {werr:+24.1%}",
            flush=True,
        )
    if not rows:
        return 1

    def summary(key: str) -> str:
        errs = [abs(r[key]) for r in rows]
        return f"median |error| {statistics.median(errs):.1%}, max {max(errs):.1%}"

    print(f"\nover {len(rows)} cells, generation-phase peak above the process baseline:")
    print(f"  infertune estimate vs exact (live tensors): {summary('error')}  (targets: median <= 5%, max <= 10%)")
    print(f"  infertune estimate vs rss (default malloc): {summary('error_rss')}")
    print(f"  weights-only estimate vs exact:             {summary('weights_only_error')}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
