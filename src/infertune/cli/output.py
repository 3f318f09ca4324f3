"""What every verb prints with: the consoles, the number formats and progress lines; and the renderers of
what was measured (a trial, a load test).

Verb modules parse, call the API and hand the result to a renderer; JSON goes to stdout untouched. The
estimates' renderers are in `infertune.cli.plan_output`, a tune run's in `infertune.cli.tune_output`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infertune.core import human

if TYPE_CHECKING:
    from pydantic import BaseModel
    from rich.status import Status

    from infertune.advisor.predicted import EstimateVsMeasured
    from infertune.measure.results import TrialResult
    from infertune.serving.loadtest import LoadTestResult

out = Console()
err = Console(stderr=True)


def gib(n: int | None) -> str:
    return "-" if n is None else f"{n / human.GiB:.2f} GiB"


def mib(n: int | None) -> str:
    return "-" if n is None else f"{n / human.MiB:,.0f} MiB"


def ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1000:,.1f} ms"


def print_json_list(rows: Sequence[BaseModel]) -> None:
    sys.stdout.write(json.dumps([r.model_dump(mode="json") for r in rows], indent=2) + "\n")


def say(msg: str) -> None:
    err.print(escape(msg), style="dim", highlight=False, soft_wrap=True)


def progress(status: Status) -> Callable[[str], None]:
    """A `say` for the API under a spinner: the spinner shows it on a terminal; elsewhere (a log, a CI
    job, a pipe) it is a line on stderr, so a long step never runs without a word."""

    def tell(msg: str) -> None:
        status.update(escape(msg))
        if not err.is_terminal:
            say(msg)

    return tell


def _share(f: float | None) -> str:
    return "-" if f is None else f"{f:.1%}"


def _ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}"


def _measured(b: int | None) -> str:
    return "not measured" if b is None else mib(b)


def _pairs(d: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in d.items())


def print_trial(r: TrialResult, comparison: EstimateVsMeasured | None = None) -> None:
    colour = "green" if r.status == "ok" else "red"
    out.print(
        f"[bold]Trial[/bold] ({r.kind}): [{colour}]{r.status}[/{colour}]  config: {r.config.label()}  "
        f"device: {r.device or '?'}  model: {r.model_path}"
    )
    if r.error:
        out.print(r.error, style="red", markup=False)
    m = r.metrics
    if m is None:
        return
    t = Table(title="Measured", show_header=True)
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_column("note", style="dim")
    t.add_row("load time", f"{m.load_s:.2f} s", "from_pretrained")
    t.add_row("weights", mib(m.weights_bytes), "get_memory_footprint")
    t.add_row("memory before load", mib(m.baseline_memory_bytes), m.memory_kind)
    t.add_row("peak memory (load)", mib(m.peak_memory_load_bytes), m.memory_kind)
    t.add_row("peak memory (generate)", mib(m.peak_memory_generate_bytes), m.memory_kind)
    t.add_row("peak memory (trial)", mib(m.peak_memory_bytes), m.memory_kind)
    if m.peak_memory_reserved_bytes is not None:
        t.add_row("peak reserved", mib(m.peak_memory_reserved_bytes), "CUDA allocator")
    for rk in m.per_rank or []:
        t.add_row(f"peak memory (rank {rk.rank})", mib(rk.peak_memory_bytes), "tensor parallel")
    if m.peak_memory_sum_bytes is not None:
        t.add_row("peak memory (all ranks)", mib(m.peak_memory_sum_bytes), "sum of the ranks' peaks")
    if m.placement:
        devices: dict[str, int] = {}
        for d in m.placement.values():
            devices[d] = devices.get(d, 0) + 1
        t.add_row("placement", ", ".join(f"{d}: {n} modules" for d, n in devices.items()), "hf_device_map")
    for dev, sec in (m.layer_forward_s or {}).items():
        t.add_row(f"layer forward ({dev})", ms(sec), "median per decoder layer")
    if m.offload_slowdown is not None:
        t.add_row("offload slowdown", f"{m.offload_slowdown:.1f}x", "offloaded layer vs resident layer")
    t.add_row("TTFT", ms(m.ttft_s), f"p50 {ms(m.ttft_p50_s)}, p95 {ms(m.ttft_p95_s)}")
    t.add_row("time per output token", ms(m.tpot_s), f"p50 {ms(m.tpot_p50_s)}, p95 {ms(m.tpot_p95_s)}")
    t.add_row("end-to-end", ms(m.e2e_s), f"p50 {ms(m.e2e_p50_s)}, p95 {ms(m.e2e_p95_s)}")
    t.add_row("throughput", f"{m.tokens_per_s:.1f} tok/s", f"{m.output_tokens} output tokens")
    t.add_row(
        "requests", str(m.requests), f"{m.generate_calls} generate calls, {m.input_tokens_mean:.0f} input tokens avg"
    )
    if m.pass_s:
        from infertune.measure.stats import spread

        sp = spread(m.pass_s)
        t.add_row(
            "passes",
            str(len(m.pass_s)),
            "one pass: no spread"
            if sp is None
            else f"pass times {min(m.pass_s):.3g}-{max(m.pass_s):.3g} s: ±{sp:.1%} run-to-run within the trial",
        )
    t.add_row("peak memory method", m.peak_memory_method or "-", "how the trial's own peak was read")
    out.print(t)
    if r.machine is not None and r.machine.busy:
        out.print(
            f"[yellow]the machine was busy while this trial ran ({'; '.join(r.machine.reasons)}): its timings "
            "may be slower and noisier than this machine can do[/yellow]"
        )
    if comparison is not None:
        c = comparison
        out.print(
            f"[dim]estimate for the same shape ({c.device}):[/dim] peak {mib(c.predicted_peak_memory_bytes)} "
            f"vs measured {mib(c.measured_peak_memory_bytes)} ({c.memory_error:+.1%}); roofline TTFT "
            f"{ms(c.roofline_ttft_s)} ({_share(c.ttft_fraction_of_roofline)} of it reached), time per token "
            f"{ms(c.roofline_tpot_s)} ({_share(c.tpot_fraction_of_roofline)} reached)"
        )
        if c.predicted_reserved_bytes is not None:
            out.print(
                f"[dim]CUDA conventions (estimate vs measured):[/dim] reserved {mib(c.predicted_reserved_bytes)} "
                f"vs {_measured(c.measured_reserved_bytes)}; device (NVML, context included) "
                f"{mib(c.predicted_device_bytes)} vs {_measured(c.measured_device_bytes)}"
            )
        if c.expected_tpot_s is not None:
            x = Table(title=f"Expected (estimate) vs measured ({c.expected_basis})")
            for col in ("", "expected", "measured", "expected/measured", "bound (roofline)"):
                x.add_column(col, justify="right")
            x.add_row(
                "TTFT",
                ms(c.expected_ttft_s),
                ms(m.ttft_s),
                _ratio(c.ttft_expected_over_measured),
                ms(c.roofline_ttft_s),
            )
            x.add_row(
                "time per output token",
                ms(c.expected_tpot_s),
                ms(m.tpot_s),
                _ratio(c.tpot_expected_over_measured),
                ms(c.roofline_tpot_s),
            )
            out.print(x)
            if c.expected_tpot_band:
                out.print(f"expected TTFT: {c.expected_ttft_band}; expected time per token: {c.expected_tpot_band}")
        if c.predicted_layers is not None and c.measured_layers is not None:
            out.print(
                f"[dim]decoder layers per device:[/dim] estimate {_pairs(c.predicted_layers)}; "
                f"loaded {_pairs(c.measured_layers)}"
            )
        for caveat in c.caveats:
            out.print(f"note: {caveat}", style="dim", markup=False)
    for o in r.outputs[:4]:
        text = o.text.strip().replace("\n", " ")
        out.print(
            f"[dim]prompt {o.prompt_index} ({o.input_tokens} in, {len(o.output_token_ids)} out, {o.finish}):[/dim] "
            f"{escape(text[:160])}{'…' if len(text) > 160 else ''}"
        )


def print_load(res: LoadTestResult) -> None:
    t = Table(title=f"Load test (measured): {res.url}{res.endpoint}, {res.max_new_tokens} tokens per request")
    open_loop = any(lv.rate is not None for lv in res.levels)
    cols = ("rate", "peak", "ok", "fail") if open_loop else ("conc", "ok", "fail")
    for col in (*cols, "TTFT p50", "TTFT p95", "ITL p50", "ITL p95", "tok/s", "req/s", "SLO"):
        t.add_column(col, justify="right")

    def msec(v: float | None) -> str:
        return "-" if v is None else f"{v * 1e3:,.0f}"

    for lv in res.levels:
        lead = (f"{lv.rate:g}/s", str(lv.concurrency)) if open_loop else (str(lv.concurrency),)
        t.add_row(
            *lead,
            str(lv.requests_ok),
            str(lv.requests_failed),
            msec(lv.ttft_s.p50),
            msec(lv.ttft_s.p95),
            msec(lv.itl_s.p50),
            msec(lv.itl_s.p95),
            f"{lv.output_tokens_per_s:,.1f}",
            f"{lv.requests_per_s:,.2f}",
            "-" if lv.meets_slo is None else ("met" if lv.meets_slo else "missed"),
        )
    out.print(t)
    out.print("TTFT and ITL (inter-token latency) in ms; p99 and the rest in --format json")
    for lv in res.levels:
        if lv.errors:
            kinds = ", ".join(f"{k} {n:,}" for k, n in lv.errors.items())
            out.print(f"concurrency {lv.concurrency}: failed requests by kind: {kinds}", style="red", markup=False)
    if res.slo["max_ttft_s"] is not None or res.slo["max_tpot_s"] is not None:
        knee = (
            (f"rate {res.knee_rate:g}/s" if res.knee_rate else None)
            if open_loop
            else (f"concurrency {res.knee_concurrency}" if res.knee_concurrency else None)
        )
        out.print(
            f"knee: {knee} is the highest that meets the SLO (p95)" if knee else "knee: no level meets the SLO (p95)"
        )
