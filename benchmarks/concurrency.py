"""Serial generate vs a padded batch vs continuous batching (generate_batch) vs `transformers serve
--continuous-batching`, at several concurrency levels, on the embedded model. Side by side, one run.

In-process modes run a burst of N requests per round (trial runner, fresh child per cell); the server
mode is load-tested with N concurrent streaming clients. Prints TTFT p50/p95, output tokens/s and the
throughput ratio to serial at the same concurrency.

    .venv/bin/python benchmarks/concurrency.py [--levels 1,4,8,16] [--max-new-tokens 16]   (~10 min, 2 cores)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import httpx

from infertune import models
from infertune.config import InferenceConfig
from infertune.measure import run_trial
from infertune.serving.loadtest import loadtest
from infertune.serving.server import ServeProcess, serve_args
from infertune.workload import Workload


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,4,8,16")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    path = models.prepare("smollm2")
    rows: dict[tuple[str, int], tuple[float, float, float]] = {}
    print(f"{'mode':12} {'conc':>4} | {'TTFT p50':>9} {'TTFT p95':>9} | {'tok/s':>7} | vs serial")
    for n in levels:
        for mode in ("serial", "static", "continuous"):
            wl = Workload(model="demo", max_new_tokens=args.max_new_tokens, ignore_eos=True, concurrency=n,
                          warmup=1, repeats=1)
            r = run_trial(InferenceConfig(dtype="bfloat16", batching=mode, max_batch_tokens=256), wl, path,
                          timeout_s=1200)
            if r.status != "ok":
                print(f"{mode:12} {n:>4} | trial {r.status}: {r.error}", flush=True)
                continue
            m = r.metrics
            rows[mode, n] = (m.ttft_p50_s, m.ttft_p95_s, m.tokens_per_s)
            base = rows.get(("serial", n), (0, 0, m.tokens_per_s))[2]
            print(f"{mode:12} {n:>4} | {m.ttft_p50_s * 1e3:8.0f}ms {m.ttft_p95_s * 1e3:8.0f}ms | "
                  f"{m.tokens_per_s:7.1f} | {m.tokens_per_s / base:5.2f}x", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        server = ServeProcess(serve_args(str(path), "bfloat16", None, True), Path(tmp) / "server.log")
        with server:
            httpx.post(server.url + "/v1/chat/completions", timeout=300,
                       json={"model": str(path), "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
            for n in levels:
                res = loadtest(server.url, str(path), [n], n, None, args.max_new_tokens, None, None)
                lv = res.levels[0]
                base = rows.get(("serial", n), (0, 0, lv.output_tokens_per_s))[2]
                print(f"{'serve --cb':12} {n:>4} | {(lv.ttft_s.p50 or 0) * 1e3:8.0f}ms {(lv.ttft_s.p95 or 0) * 1e3:8.0f}ms"
                      f" | {lv.output_tokens_per_s:7.1f} | {lv.output_tokens_per_s / base:5.2f}x"
                      + (f"  failed: {lv.errors}" if lv.errors else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
