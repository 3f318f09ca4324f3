"""A load test's report (loadtest, serve-trial): load.json, load.md and load.html with throughput versus
load and the latency percentiles per level. Every number here was measured against the server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infertune.paths import write_atomic
from infertune.report.render import html_page, png, pyplot
from infertune.serving.loadtest import LoadTestResult


def _x(res: LoadTestResult) -> tuple[list[float], str]:
    """The load axis: offered rate (open loop) or concurrency (closed loop)."""
    if any(lv.rate is not None for lv in res.levels):
        return [lv.rate or 0.0 for lv in res.levels], "offered rate, requests/s"
    return [float(lv.concurrency) for lv in res.levels], "concurrency (requests in flight)"


def plots(res: LoadTestResult) -> list[tuple[str, str]]:
    plt = pyplot()
    xs, xlabel = _x(res)
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(xs, [lv.output_tokens_per_s for lv in res.levels], "o-", color="#55a868", label="output tokens/s")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("output tokens/s (measured)")
    ax2 = ax.twinx()
    ax2.plot(xs, [lv.requests_per_s for lv in res.levels], "s--", color="#4c72b0", label="requests/s")
    ax2.set_ylabel("requests/s (measured)")
    fig.legend(fontsize=8, loc="upper left")
    out = [("Throughput versus load (measured)", png(fig))]

    fig, axes = plt.subplots(1, 2, figsize=(9, 3))
    for ax, key, name in ((axes[0], "ttft_s", "TTFT"), (axes[1], "itl_s", "inter-token latency")):
        for p, style in (("p50", "o-"), ("p95", "s--"), ("p99", "^:")):
            ys = [getattr(getattr(lv, key), p) for lv in res.levels]
            ax.plot(xs, [None if y is None else y * 1e3 for y in ys], style, label=p)
        limit = res.slo.get("max_ttft_s" if key == "ttft_s" else "max_tpot_s")
        if limit is not None:
            ax.axhline(limit * 1e3, color="red", lw=0.8, label="SLO (p95)")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"{name}, ms (measured)")
        ax.legend(fontsize=8)
    out.append(("Latency percentiles versus load (measured)", png(fig)))
    return out


def markdown(res: LoadTestResult, meta: dict[str, Any]) -> str:
    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v * 1e3:,.1f}"

    lines = [f"# infertune load test: {res.url}{res.endpoint}", ""]
    if meta.get("command"):
        lines += [f"Server: `{meta['command']}`", ""]
    lines += [f"{res.max_new_tokens} tokens per request. All numbers measured; latencies in ms.", "",
              "| load | ok | failed | TTFT p50 | TTFT p95 | TTFT p99 | ITL p50 | ITL p95 | ITL p99 | tok/s | req/s | SLO |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for lv in res.levels:
        load = f"{lv.rate:g}/s (peak {lv.concurrency})" if lv.rate is not None else f"{lv.concurrency}"
        slo = "-" if lv.meets_slo is None else ("met" if lv.meets_slo else "missed")
        lines.append(f"| {load} | {lv.requests_ok} | {lv.requests_failed} | {ms(lv.ttft_s.p50)} | {ms(lv.ttft_s.p95)} | "
                     f"{ms(lv.ttft_s.p99)} | {ms(lv.itl_s.p50)} | {ms(lv.itl_s.p95)} | {ms(lv.itl_s.p99)} | "
                     f"{lv.output_tokens_per_s:,.1f} | {lv.requests_per_s:,.2f} | {slo} |")
    errors = [f"- load {lv.rate or lv.concurrency}: {lv.errors}" for lv in res.levels if lv.errors]
    if errors:
        lines += ["", "Failed requests by kind:", ""] + errors
    knee = res.knee_rate or res.knee_concurrency
    if res.slo.get("max_ttft_s") is not None or res.slo.get("max_tpot_s") is not None:
        lines += ["", f"Knee (highest load meeting the p95 SLO {res.slo}): {knee if knee else 'none'}"]
    return "\n".join(lines) + "\n"


def write(out_dir: Path, res: LoadTestResult, **meta: Any) -> dict[str, Any]:
    """load.json (the result plus `meta`: the server command, its log), load.md, load.html."""
    out_dir = Path(out_dir)
    data = {**meta, **res.model_dump(mode="json")}
    write_atomic(out_dir / "load.json", json.dumps(data, indent=2))
    md = markdown(res, meta)
    write_atomic(out_dir / "load.md", md)
    write_atomic(out_dir / "load.html", html_page("infertune load test", plots(res), md))
    return data
