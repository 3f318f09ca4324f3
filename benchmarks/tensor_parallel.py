"""Tensor parallelism on this CPU: TP=1 against TP=N (torchrun, gloo) on the embedded model, side by side
in one run: memory per rank, tokens/s, and whether the greedy outputs agree.

SmolLM2-135M has 9 attention heads and 3 KV heads, so N must divide both: 3 (2 is refused up front).
On 2 cores, 3 ranks share 2 cores and add an all-reduce per layer: TP buys no speed here. What it shows
honestly is the memory split (each rank holds its shard of every layer plus the replicated parts) and
that the split model computes the same tokens.

    .venv/bin/python benchmarks/tensor_parallel.py [--tp 3] [--max-new-tokens 16]   (~2 min, 2 cores)
"""

from __future__ import annotations

import argparse
import sys

from infertune import models
from infertune.config import InferenceConfig
from infertune.measure import run_trial
from infertune.workload import Workload

MiB = 2**20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tp", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    args = ap.parse_args()
    path = models.prepare("smollm2")
    wl = Workload(model="demo", max_new_tokens=args.max_new_tokens, ignore_eos=True, warmup=1, repeats=1)
    runs = {tp: run_trial(InferenceConfig(tp_size=tp), wl, path, timeout_s=1200) for tp in (1, args.tp)}
    one, many = runs[1], runs[args.tp]
    for tp, r in runs.items():
        if r.status != "ok":
            print(f"TP={tp}: {r.status}: {r.error}")
            return 1
    print(f"{'':8} | {'peak/rank':>10} {'all ranks':>10} | {'weights':>8} | {'tok/s':>6} | TTFT")
    for tp, r in runs.items():
        m = r.metrics
        ranks = m.per_rank or []
        per = max(p.peak_memory_bytes for p in ranks) if ranks else m.peak_memory_bytes
        above = per - m.baseline_memory_bytes
        print(f"TP={tp:<5} | {per / MiB:9.0f}M {(m.peak_memory_sum_bytes or per) / MiB:9.0f}M | "
              f"{m.weights_bytes / MiB:7.0f}M | {m.tokens_per_s:6.1f} | {m.ttft_s * 1e3:5.0f} ms  "
              f"(above the runtime: {above / MiB:.0f}M per rank)")
    a, b = one.metrics, many.metrics
    same = [o.output_token_ids for o in one.outputs] == [o.output_token_ids for o in many.outputs]
    print(f"ratios TP={args.tp} / TP=1: peak per rank {max(p.peak_memory_bytes for p in b.per_rank) / a.peak_memory_bytes:.2f}x, "
          f"all ranks {b.peak_memory_sum_bytes / a.peak_memory_bytes:.2f}x, tokens/s {b.tokens_per_s / a.tokens_per_s:.2f}x; "
          f"greedy outputs identical: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
