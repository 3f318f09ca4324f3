"""The tune report's charts, drawn from report.json alone. Each answers one question a design review asks:
how each step did against the baseline, what it cost in latency and memory, whether quality held, how
memory grows with context, how the served result behaves under load. Value axes start at zero, counts
get whole-number ticks, every axis names its quantity and unit, and measured and estimated series are
told apart in the legend (solid/markers: measured; dashed: estimate)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infertune.core import human
from infertune.report.style import COLOURS, SERIES, from_zero, integer_ticks, pyplot, size_scale, svg_uri, time_scale
from infertune.report.verdict import step_verdict

if TYPE_CHECKING:
    from matplotlib.axes import Axes

Chart = tuple[str, str, str]  # title, data URI, caption


def _label(s: dict[str, Any]) -> str:
    return f"{s['index']}  {s['technique'] or 'baseline'}"


def _legend(ax: Axes, verdicts: list[str]) -> None:
    from matplotlib.patches import Patch

    seen = [v for v in ("baseline", "kept", "rejected", "inconclusive", "failed") if v in verdicts]
    ax.legend(handles=[Patch(color=COLOURS[v], label=v) for v in seen], loc="lower right", framealpha=0.9)


def _hbars(
    ax: Axes,
    steps: list[dict],
    values: list[float | None],
    text: list[str],
    xlabel: str,
    spread: list[float | None] | None = None,
) -> None:
    """One horizontal bar per step (first step on top), coloured by verdict, labelled with its value; with
    `spread` (relative half-widths), whiskers, and the labels past them."""
    y = list(range(len(steps)))
    ends = [v or 0 for v in values]
    bars = ax.barh(y, ends, color=[COLOURS[step_verdict(s)] for s in steps], height=0.6)
    if spread and any(x is not None for x in spread):
        half = [(x or 0) * e for x, e in zip(spread, ends, strict=True)]
        ax.errorbar(ends, y, xerr=half, fmt="none", ecolor="#24292f", capsize=3, lw=1)
        for yi, e, h, t in zip(y, ends, half, text, strict=True):
            ax.annotate(t, (e + h, yi), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    else:
        ax.bar_label(bars, labels=text, padding=3, fontsize=8)
    ax.set_yticks(y, [_label(s) for s in steps])
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.grid(axis="y", visible=False)
    from_zero(ax, "x")
    ax.set_xlim(right=ax.get_xlim()[1] * 1.22)  # room for the value labels


def objective_chart(r: dict[str, Any]) -> Chart | None:
    steps = r["steps"]
    if not steps:
        return None
    obj = r["objective"]
    raw = [s.get("objective") for s in steps]
    if obj == "memory":
        div, unit = size_scale(raw)
        vals = [None if v is None else v / div for v in raw]
        axis = f"peak memory above the process baseline, {unit}"
    elif obj == "latency":
        f, unit = time_scale(raw)
        vals = [None if v is None else v * f for v in raw]
        axis = f"end-to-end latency per request, {unit}"
    else:
        vals, axis = raw, "output tokens per second"
    better = "higher is better" if obj == "throughput" else "lower is better"
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(steps) + 1.3))
    text = [
        human.objective(obj, v) if v is not None else s["measured"].get("status", "failed")
        for s, v in zip(steps, raw, strict=True)
    ]
    noise = [s.get("noise") for s in steps]
    _hbars(ax, steps, vals, text, f"{axis} (measured; {better})", spread=noise)
    if vals[0] is not None:
        ax.axvline(vals[0], color="#57606a", ls="--", lw=1)
    _legend(ax, [step_verdict(s) for s in steps])
    caption = "Each bar is one trial on this machine. The dashed line is the baseline. " + (
        "Whiskers: the noise band each decision used."
        if any(n is not None for n in noise)
        else "No noise band was measured (one trial per step)."
    )
    return (f"Each step against the baseline: {human.OBJECTIVE.get(obj, obj)} (measured)", svg_uri(fig), caption)


def cost_chart(r: dict[str, Any]) -> Chart | None:
    ok = [s for s in r["steps"] if s["measured"].get("status") == "ok"]
    if not ok:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(10, 0.42 * len(ok) + 1.4), sharey=True)
    m = [s["measured"] for s in ok]
    f1, u1 = time_scale([x["ttft_s"] for x in m])
    _hbars(
        axes[0],
        ok,
        [x["ttft_s"] * f1 for x in m],
        [human.duration(x["ttft_s"]) for x in m],
        f"time to first token, {u1}",
    )
    f2, u2 = time_scale([x.get("tpot_s") for x in m])
    _hbars(
        axes[1],
        ok,
        [(x.get("tpot_s") or 0) * f2 for x in m],
        [human.duration(x.get("tpot_s")) for x in m],
        f"time per output token, {u2}",
    )
    d3, u3 = size_scale([x["peak_memory_bytes"] for x in m])
    _hbars(
        axes[2],
        ok,
        [x["peak_memory_bytes"] / d3 for x in m],
        [human.size(x["peak_memory_bytes"]) for x in m],
        f"peak memory, {u3}",
    )
    for ax in axes[1:]:
        ax.tick_params(axis="y", left=False)
    kind = "process RSS" if m[0].get("memory_kind") == "cpu_rss" else "CUDA allocated"
    caption = (
        f"Means over the timed requests; peak memory is the trial's {kind} (the Python and torch runtime "
        "included). Lower is better on all three."
    )
    return "Latency and memory per step (measured)", svg_uri(fig), caption


def percentile_chart(r: dict[str, Any]) -> Chart | None:
    """Under concurrency the tail is what users feel: TTFT p50/p95/p99 per step."""
    ok = [s for s in r["steps"] if s["measured"].get("status") == "ok"]
    if not ok or max(s["measured"].get("concurrency") or 1 for s in ok) <= 1:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.5 * len(ok) + 1.6), sharey=True)
    for ax, key, name in (
        (axes[0], "ttft_percentiles_s", "time to first token"),
        (axes[1], "tpot_percentiles_s", "inter-token latency"),
    ):
        vals = [s["measured"][key] for s in ok]
        f, unit = time_scale([v[p] for v in vals for p in ("p50", "p95", "p99")])
        for k, p in enumerate(("p50", "p95", "p99")):
            ax.barh(
                [i + (k - 1) * 0.26 for i in range(len(ok))],
                [(v[p] or 0) * f for v in vals],
                0.26,
                color=SERIES[k],
                label=p,
            )
        ax.set_yticks(range(len(ok)), [_label(s) for s in ok])
        ax.invert_yaxis()
        ax.set_xlabel(f"{name}, {unit}")
        ax.grid(axis="y", visible=False)
        from_zero(ax, "x")
        ax.legend(loc="lower right")
    conc = ok[0]["measured"].get("concurrency")
    return (
        f"Latency percentiles per step at concurrency {conc} (measured)",
        svg_uri(fig),
        "p50: the typical request; p95 and p99: the slow tail that queueing adds.",
    )


def quality_chart(r: dict[str, Any]) -> Chart | None:
    q = [s for s in r["steps"] if s.get("quality")]
    if not q:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.42 * len(q) + 1.4), sharey=True)
    match = [s["quality"]["exact_match_rate"] * 100 for s in q]
    _hbars(
        axes[0],
        q,
        match,
        [human.share(s["quality"]["exact_match_rate"]) for s in q],
        "greedy outputs equal to the baseline's, % of prompts",
    )
    axes[0].set_xlim(0, 122)
    nll = [s["quality"].get("nll_delta") for s in q]
    y = list(range(len(q)))
    axes[1].barh(y, [v or 0 for v in nll], color=[COLOURS[step_verdict(s)] for s in q], height=0.6)
    axes[1].bar_label(
        axes[1].containers[0], labels=["-" if v is None else f"{v:+.3f}" for v in nll], padding=3, fontsize=8
    )
    axes[1].axvline(0, color="#24292f", lw=0.8)
    axes[1].set_xlabel("reference NLL change, nats/token (0: unchanged)")
    axes[1].grid(axis="y", visible=False)
    axes[1].tick_params(axis="y", left=False)
    lo, hi = axes[1].get_xlim()
    span = max(abs(lo), abs(hi), 0.01) * 1.3
    axes[1].set_xlim(-span, span)
    tol = (r.get("tolerance") or {}).get("max_nll_increase")
    if tol is not None and tol <= span:
        axes[1].axvline(tol, color=COLOURS["rejected"], ls=":", lw=1)
    return (
        "Quality against the baseline (measured)",
        svg_uri(fig),
        "Left: share of prompts whose greedy output is token-for-token the baseline's. Right: change of the "
        "teacher-forced NLL on a reference text; the dotted line is the tolerance.",
    )


def context_chart(r: dict[str, Any]) -> Chart | None:
    c = r.get("memory_vs_context")
    if not c or not c.get("input_tokens"):
        return None
    xs = c["input_tokens"]
    curves = c["estimate_bytes"]
    points = c.get("measured") or []
    cap = c.get("capacity_bytes")
    top = max([v for ys in curves.values() for v in ys] + [p["bytes"] for p in points])
    div, unit = size_scale([top])
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    for k, (name, ys) in enumerate(curves.items()):
        ax.plot(xs, [v / div for v in ys], ls="--", color=SERIES[k], lw=1.6, label=f"{name} (estimate)")
    for k, name in enumerate(curves):
        pts = [p for p in points if p["setup"] == name]
        if pts:
            ax.plot(
                [p["input_tokens"] for p in pts],
                [p["bytes"] / div for p in pts],
                "o",
                color=SERIES[k],
                ms=7,
                mec="black",
                label=f"{name} (measured, this run)",
            )
    note = ""
    if cap and cap <= 4 * top:
        ax.axhline(
            cap / div, color=COLOURS["rejected"], lw=1, label=f"{c.get('capacity_name', 'memory')} ({human.size(cap)})"
        )
    elif cap:
        note = f" This machine's {c.get('capacity_name', 'memory')} ({human.size(cap)}) is far above the chart."
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [f"{x // 1024}k" if x >= 1024 else str(x) for x in xs])
    ax.minorticks_off()
    ax.set_xlabel("input tokens per request (log scale)")
    ax.set_ylabel(f"peak memory above the process baseline, {unit}")
    from_zero(ax)
    ax.legend(loc="upper left")
    return (
        "Memory versus context length (estimate, with the measured points)",
        svg_uri(fig),
        "Dashed: the estimator's peak for each configuration at that prompt length (weights, KV cache, "
        "activations); dots: what the trials measured at the workload's length." + note,
    )


def served_chart(r: dict[str, Any]) -> Chart | None:
    served = [v for v in r.get("served", []) if v["status"] == "ok"]
    if not served:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    f, unit = time_scale([(lv["ttft_s"]["p95"] or 0) for v in served for lv in v["levels"]])
    levels = set()
    for k, v in enumerate(served):
        xs = [lv["concurrency"] for lv in v["levels"]]
        levels |= set(xs)
        axes[0].plot(
            xs,
            [(lv["ttft_s"]["p50"] or 0) * f for lv in v["levels"]],
            "o-",
            color=SERIES[k],
            label=f"{v['label']}, p50",
        )
        axes[0].plot(
            xs,
            [(lv["ttft_s"]["p95"] or 0) * f for lv in v["levels"]],
            "s--",
            color=SERIES[k],
            label=f"{v['label']}, p95",
        )
        axes[1].plot(xs, [lv["output_tokens_per_s"] for lv in v["levels"]], "o-", color=SERIES[k], label=v["label"])
    axes[0].set_ylabel(f"time to first token, {unit}")
    axes[1].set_ylabel("output tokens per second")
    for ax in axes:
        ax.set_xlabel("concurrent requests")
        integer_ticks(ax, levels)
        from_zero(ax)
        ax.set_xlim(left=0)
        ax.legend(loc="best")
    return (
        "Served: latency and throughput versus load (measured)",
        svg_uri(fig),
        "Each point is one load level of a closed-loop test against the running server.",
    )


def tune_charts(r: dict[str, Any]) -> list[Chart]:
    out = [objective_chart(r), cost_chart(r), percentile_chart(r), quality_chart(r), context_chart(r), served_chart(r)]
    return [c for c in out if c is not None]
