"""A load test's report (loadtest, serve-trial): load.json, load.md and load.html. The page leads with what
the server sustained, then the levels as a table, then latency versus load and throughput versus load.
Every number here was measured against the server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infertune.core import human
from infertune.core.paths import write_atomic
from infertune.report.style import (
    SERIES,
    bullets,
    code,
    document,
    esc,
    figure,
    from_zero,
    integer_ticks,
    pyplot,
    svg_uri,
    table,
    tag,
    time_scale,
)
from infertune.serving.loadtest import LevelResult, LoadTestResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _open_loop(res: LoadTestResult) -> bool:
    return any(lv.rate is not None for lv in res.levels)


def _x(res: LoadTestResult) -> tuple[list[float], str]:
    """The load axis: offered rate (open loop) or concurrency (closed loop)."""
    if _open_loop(res):
        return [lv.rate or 0.0 for lv in res.levels], "offered load, requests per second"
    return [float(lv.concurrency) for lv in res.levels], "concurrent requests"


def _load_name(res: LoadTestResult, lv: LevelResult) -> str:
    return f"{human.number(lv.rate)} requests/s offered" if lv.rate is not None else f"concurrency {lv.concurrency}"


def slo_text(slo: dict[str, float | None]) -> str:
    parts = [
        f"TTFT p95 under {human.duration(slo['max_ttft_s'])}" if slo.get("max_ttft_s") is not None else "",
        f"inter-token latency p95 under {human.duration(slo['max_tpot_s'])}"
        if slo.get("max_tpot_s") is not None
        else "",
    ]
    return " and ".join(p for p in parts if p)


def _axes(ax: Axes, res: LoadTestResult, xs: list[float]) -> None:
    """Values from zero; concurrency levels as whole-number ticks."""
    from_zero(ax)
    if not _open_loop(res):
        integer_ticks(ax, xs)
        ax.set_xlim(0, max(xs) * 1.08)


def plots(res: LoadTestResult) -> list[tuple[str, str, str]]:
    plt = pyplot()
    xs, xlabel = _x(res)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    far = []
    for ax, key, name in ((axes[0], "ttft_s", "time to first token"), (axes[1], "itl_s", "inter-token latency")):
        per = [getattr(lv, key) for lv in res.levels]
        seen = [v for p in per for v in (p.p50, p.p95, p.p99) if v is not None]
        limit = res.slo.get("max_ttft_s" if key == "ttft_s" else "max_tpot_s")
        drawn = limit is not None and (not seen or limit <= 3 * max(seen))  # a far-off SLO would flatten the data
        f, unit = time_scale(seen + ([limit] if drawn else []))
        for k, (p, style) in enumerate((("p50", "o-"), ("p95", "s--"), ("p99", "^:"))):
            ys = [getattr(x, p) for x in per]
            ax.plot(xs, [None if y is None else y * f for y in ys], style, color=SERIES[k], label=p)
        if drawn and limit is not None:
            ax.axhline(limit * f, color="#d55e00", lw=1, label=f"SLO, p95 ({human.duration(limit)})")
        elif limit is not None:
            far.append(f"the {name} SLO ({human.duration(limit)}) is far above every level")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"{name}, {unit}")
        _axes(ax, res, xs)
        ax.legend(loc="best")
    out = [
        (
            "Latency versus load (measured)",
            svg_uri(fig),
            "p50: the typical request; p95 and p99: the slow tail. Lower is better."
            + "".join(f" Not drawn: {x}." for x in far),
        )
    ]

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
    axes[0].plot(xs, [lv.output_tokens_per_s for lv in res.levels], "o-", color=SERIES[2])
    axes[0].set_ylabel("output tokens per second")
    axes[1].plot(xs, [lv.requests_per_s for lv in res.levels], "o-", color=SERIES[0])
    axes[1].set_ylabel("completed requests per second")
    for ax in axes:
        ax.set_xlabel(xlabel)
        _axes(ax, res, xs)
    out.append(
        (
            "Throughput versus load (measured)",
            svg_uri(fig),
            "Throughput that stops growing with load marks the server's capacity. Higher is better.",
        )
    )
    return out


def summary(res: LoadTestResult) -> str:
    """One sentence: what the server sustained, and where it stopped meeting the SLO."""
    ok = [lv for lv in res.levels if lv.requests_ok]
    if not ok:
        return "No request succeeded at any load level."
    top = max(ok, key=lambda lv: lv.output_tokens_per_s)
    text = (
        f"Highest throughput {human.rate(top.output_tokens_per_s, 'output tokens/s')} at {_load_name(res, top)} "
        f"(TTFT p95 {human.duration(top.ttft_s.p95)}, inter-token latency p95 {human.duration(top.itl_s.p95)})."
    )
    slo = slo_text(res.slo)
    if slo:
        knee = next((lv for lv in reversed(res.levels) if lv.meets_slo), None)
        text += (
            f" Highest load meeting the SLO ({slo}): {_load_name(res, knee)}."
            if knee
            else f" No level meets the SLO ({slo})."
        )
    failed = sum(lv.requests_failed for lv in res.levels)
    if failed:
        text += f" {failed:,} request{'s' * (failed != 1)} failed (by kind in the table)."
    return text


def _rows(res: LoadTestResult) -> list[list[str]]:
    rows = []
    for lv in res.levels:
        load = f"{human.number(lv.rate)}/s (peak {lv.concurrency})" if lv.rate is not None else f"{lv.concurrency:,}"
        slo = "-" if lv.meets_slo is None else ("met" if lv.meets_slo else "missed")
        errors = ", ".join(f"{k} {n:,}" for k, n in lv.errors.items()) or "-"
        rows.append(
            [
                load,
                f"{lv.requests_ok:,}",
                f"{lv.requests_failed:,}",
                errors,
                *(human.duration(getattr(lv.ttft_s, p)) for p in ("p50", "p95", "p99")),
                *(human.duration(getattr(lv.itl_s, p)) for p in ("p50", "p95", "p99")),
                human.rate(lv.output_tokens_per_s, "tok/s"),
                human.rate(lv.requests_per_s, "req/s"),
                slo,
            ]
        )
    return rows


HEADERS = [
    "concurrency",
    "ok",
    "failed",
    "failures",
    "TTFT p50",
    "TTFT p95",
    "TTFT p99",
    "ITL p50",
    "ITL p95",
    "ITL p99",
    "throughput",
    "requests",
    "SLO",
]


def headers(res: LoadTestResult) -> list[str]:
    return (["offered rate"] if _open_loop(res) else []) + HEADERS[int(_open_loop(res)) :]


def markdown(res: LoadTestResult, meta: dict[str, Any]) -> str:
    lines = [f"# infertune load test: {res.url}{res.endpoint}", "", f"**{summary(res)}**", ""]
    if meta.get("command"):
        lines += [f"Server: `{meta['command']}`", ""]
    lines += [
        f"{res.max_new_tokens:,} tokens per request; every number measured. TTFT: time to first token; ITL: "
        "inter-token latency.",
        "",
        "| " + " | ".join(headers(res)) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(res)]
    return "\n".join(lines) + "\n"


def page(res: LoadTestResult, meta: dict[str, Any]) -> str:
    body = (
        f"<h1>infertune load test</h1><p class='sub'>{esc(res.url + res.endpoint)}, "
        f"{res.max_new_tokens:,} tokens per request. {tag('measured')} every number.</p>"
        f"<section id='verdict' class='verdict'><h2>Verdict</h2><p class='headline'>{esc(summary(res))}</p>"
        "</section><section id='levels'><h2>Load levels</h2>"
        + table(headers(res), _rows(res), num=set(range(1, 12)) - {3})
        + "<p class='legend'>TTFT: time to first token; ITL: inter-token latency.</p></section>"
        + "<section id='charts'><h2>Charts</h2>"
        + "".join(figure(*c) for c in plots(res))
        + "</section>"
    )
    if meta.get("command"):
        body += "<section id='ship'><h2>The server</h2>" + code(meta["command"], "Command", "bash")
        if meta.get("server_peak_rss_bytes"):
            body += bullets([f"server peak memory (RSS): {human.size(meta['server_peak_rss_bytes'])}"])
        body += "</section>"
    return document("infertune load test", body)


def write(out_dir: Path, res: LoadTestResult, **meta: Any) -> dict[str, Any]:
    """load.json (the result plus `meta`: the server command, its log), load.md, load.html."""
    out_dir = Path(out_dir)
    data = {**meta, **res.model_dump(mode="json")}
    write_atomic(out_dir / "load.json", json.dumps(data, indent=2))
    write_atomic(out_dir / "load.md", markdown(res, meta))
    write_atomic(out_dir / "load.html", page(res, meta))
    return data
