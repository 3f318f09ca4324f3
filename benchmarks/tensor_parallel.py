"""Tensor parallelism on this CPU: TP=1 against TP=2 and TP=3 (torchrun, gloo) on the embedded model,
side by side in one run: memory per rank, tokens/s, and whether the greedy outputs agree.

SmolLM2-135M has 9 attention heads and 3 KV heads. Its own plan splits heads, so it needs a size that
divides both: 3. TP=2 runs with the MLP-only plan (`--tp-plan mlp`: attention replicated on each rank, the
MLP's 1536 columns split). On 2 cores the ranks share the cores and add all-reduces: TP buys no speed here.
What it shows honestly is the memory split (each rank holds its shard plus the replicated parts) and that
the split model computes the same tokens.

    .venv/bin/python benchmarks/tensor_parallel.py [--max-new-tokens 16]   (~3 min, 2 cores)
"""

from __future__ import annotations

import argparse
import sys

from infertune.core.config import InferenceConfig
from infertune.core.workload import Workload
from infertune.measure import run_trial
from infertune.models import store
from infertune.probe.model import mlp_only_tp_plan

MiB = 2**20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-new-tokens", type=int, default=16)
    args = ap.parse_args()
    path = store.prepare("smollm2")
    wl = Workload(model="demo", max_new_tokens=args.max_new_tokens, ignore_eos=True, warmup=1, repeats=1)
    configs = {
        "TP=1": InferenceConfig(),
        "TP=2 mlp": InferenceConfig(tp_size=2, tp_plan=mlp_only_tp_plan(str(path))),
        "TP=3 auto": InferenceConfig(tp_size=3),
    }
    runs = {}
    for name, cfg in configs.items():
        runs[name] = r = run_trial(cfg, wl, path, timeout_s=1200)
        if r.status != "ok":
            print(f"{name}: {r.status}: {r.error}")
            return 1
    print(f"{'':10} | {'peak/rank':>10} {'all ranks':>10} | {'tok/s':>6} | {'TTFT':>7} | above the runtime, per rank")
    one = runs["TP=1"]
    for name, r in runs.items():
        m = r.metrics
        per = max(p.peak_memory_bytes for p in m.per_rank) if m.per_rank else m.peak_memory_bytes
        print(
            f"{name:10} | {per / MiB:9.0f}M {(m.peak_memory_sum_bytes or per) / MiB:9.0f}M | {m.tokens_per_s:6.1f} | "
            f"{m.ttft_s * 1e3:4.0f} ms | {(per - m.baseline_memory_bytes) / MiB:.0f}M"
        )
    a = one.metrics
    for name, r in list(runs.items())[1:]:
        b = r.metrics
        same = [o.output_token_ids for o in one.outputs] == [o.output_token_ids for o in r.outputs]
        print(
            f"{name} / TP=1: peak per rank {max(p.peak_memory_bytes for p in b.per_rank) / a.peak_memory_bytes:.2f}x, "
            f"above the runtime {(max(p.peak_memory_bytes for p in b.per_rank) - b.baseline_memory_bytes) / (a.peak_memory_bytes - a.baseline_memory_bytes):.2f}x, "
            f"all ranks {b.peak_memory_sum_bytes / a.peak_memory_bytes:.2f}x, tokens/s {b.tokens_per_s / a.tokens_per_s:.2f}x; "
            f"greedy outputs identical: {same}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
