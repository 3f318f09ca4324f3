"""`transformers serve --continuous-batching` against vLLM on this host, on the embedded model, in one run.

Both servers are started by infertune's own serve trial (loopback, a free port, whole process tree stopped),
with the same chat requests at each concurrency level, and load-tested by infertune's load tester. Prints each
engine's start-up time, peak memory over all its processes, TTFT p50 and output tokens/s per level, then
vLLM / transformers ratios. Needs `infertune engines install vllm` first (it says so otherwise).

    .venv/bin/python benchmarks/engines.py [--levels 1,4,8] [--requests 8] [--max-new-tokens 64]
    (~10 min on 2 CPU cores, most of it vLLM's start-up)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from infertune.core.config import serve_flags, vllm_flags
from infertune.models import store
from infertune.serving import engines
from infertune.serving.trial import run_serve_trial
from infertune.techniques.batching import BLOCK_SIZE


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,4,8")
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    if not engines.info("vllm").ok:
        print("vLLM is not installed: run `infertune engines install vllm` first", file=sys.stderr)
        return 2
    path = str(store.prepare("smollm2"))
    load = os.getloadavg()[0]
    print(
        f"load average at start {load:.1f} on {os.cpu_count()} cores"
        + ("  (busy: numbers are noisy)" if load > (os.cpu_count() or 1) else "")
    )
    blocks = 4 * max(levels)  # a few 32-token pages per request: prompt + 64 new tokens
    runs = {
        "transformers": serve_flags(
            dtype="bfloat16", continuous_batching=True, block_size=BLOCK_SIZE, num_blocks=blocks
        ),
        "vllm": vllm_flags(dtype="bfloat16", max_model_len=2048, max_num_seqs=max(levels)),
    }
    trials = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in runs.items():
            print(f"{name}: starting ...", flush=True)
            trials[name] = t = run_serve_trial(
                path, flags, Path(tmp) / f"{name}.log", levels, args.requests, args.max_new_tokens, engine=name
            )
            print(f"{name}: start-up {t.startup_s:.0f} s, peak {(t.peak_memory_bytes or 0) / 2**20:,.0f} MiB")
            for lv in t.load.levels:
                print(
                    f"  c={lv.concurrency:<3} TTFT p50 {(lv.ttft_s.p50 or 0) * 1e3:7.0f} ms  "
                    f"{lv.output_tokens_per_s:7.1f} tok/s  ok {lv.requests_ok}, failed {lv.requests_failed}",
                    flush=True,
                )
    print("\nvLLM / transformers serve --continuous-batching")
    for a, b in zip(trials["vllm"].load.levels, trials["transformers"].load.levels):
        ttft = (a.ttft_s.p50 or 0) / (b.ttft_s.p50 or float("inf"))
        print(
            f"  c={a.concurrency:<3} throughput {a.output_tokens_per_s / b.output_tokens_per_s:5.2f}x   "
            f"TTFT p50 {ttft:5.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
