"""Serial generate vs a padded batch vs continuous batching (generate_batch) vs `transformers serve
--continuous-batching`, at several concurrency levels, on the embedded model. Side by side, one run.

In-process modes run a burst of N requests per round (trial runner, fresh child per cell); the server
mode is load-tested with N concurrent streaming clients. Prints TTFT p50/p95, output tokens/s, peak
memory and the throughput ratio to serial at the same concurrency. `continuous` leaves the paged cache to
transformers (sized from free memory); `cont-sized` sizes it to the burst as the tuner does.

    .venv/bin/python benchmarks/concurrency.py [--levels 1,4,8,16] [--max-new-tokens 16]   (~12 min, 2 cores)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import httpx

from infertune.core.config import InferenceConfig, serve_flags
from infertune.core.workload import Workload
from infertune.measure import run_trial
from infertune.models import store
from infertune.serving.loadtest import loadtest
from infertune.serving.server import ServeProcess
from infertune.techniques.batching import BLOCK_SIZE


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,4,8,16")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    path = store.prepare("smollm2")
    rows: dict[tuple[str, int], tuple[float, float, float]] = {}
    print(f"{'mode':12} {'conc':>4} | {'TTFT p50':>9} {'TTFT p95':>9} | {'tok/s':>7} | {'peak':>7} | vs serial")
    blocks = 2  # per request: the default prompts + 16 tokens fit one 256-token block; one spare
    for n in levels:
        for mode in ("serial", "static", "continuous", "cont-sized"):
            wl = Workload(
                model="demo", max_new_tokens=args.max_new_tokens, ignore_eos=True, concurrency=n, warmup=1, repeats=1
            )
            cb = {"max_batch_tokens": 256} if mode.startswith("cont") else {}
            if mode == "cont-sized":
                cb.update(cb_block_size=BLOCK_SIZE, cb_num_blocks=blocks * n)
            cfg = InferenceConfig(dtype="bfloat16", batching="continuous" if cb else mode, **cb)
            r = run_trial(cfg, wl, path, timeout_s=1200)
            if r.status != "ok":
                print(f"{mode:12} {n:>4} | trial {r.status}: {r.error}", flush=True)
                continue
            m = r.metrics
            rows[mode, n] = (m.ttft_p50_s, m.ttft_p95_s, m.tokens_per_s)
            base = rows.get(("serial", n), (0, 0, m.tokens_per_s))[2]
            print(
                f"{mode:12} {n:>4} | {m.ttft_p50_s * 1e3:8.0f}ms {m.ttft_p95_s * 1e3:8.0f}ms | "
                f"{m.tokens_per_s:7.1f} | {m.peak_memory_bytes / 2**20:6.0f}M | {m.tokens_per_s / base:5.2f}x",
                flush=True,
            )
    with tempfile.TemporaryDirectory() as tmp:
        flags = serve_flags(
            dtype="bfloat16", continuous_batching=True, block_size=BLOCK_SIZE, num_blocks=blocks * max(levels)
        )
        server = ServeProcess([str(path), *flags], Path(tmp) / "server.log")
        with server:
            httpx.post(
                server.url + "/v1/chat/completions",
                timeout=300,
                json={"model": str(path), "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
            )
            for n in levels:
                res = loadtest(server.url, str(path), [n], n, None, args.max_new_tokens, None, None)
                lv = res.levels[0]
                base = rows.get(("serial", n), (0, 0, lv.output_tokens_per_s))[2]
                ttft = f"{(lv.ttft_s.p50 or 0) * 1e3:8.0f}ms {(lv.ttft_s.p95 or 0) * 1e3:8.0f}ms"
                peak = server.peak_rss_bytes() or 0
                print(
                    f"{'serve --cb':12} {n:>4} | {ttft} | {lv.output_tokens_per_s:7.1f} | {peak / 2**20:6.0f}M | "
                    f"{lv.output_tokens_per_s / base:5.2f}x" + (f"  failed: {lv.errors}" if lv.errors else ""),
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
