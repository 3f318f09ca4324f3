"""Everything the CLI prints: the consoles, the number formats and one renderer per result kind.

Verb modules parse, call the API and hand the result here; JSON goes to stdout untouched.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from infertune.core import human

if TYPE_CHECKING:
    from pydantic import BaseModel

out = Console()
err = Console(stderr=True)


def gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f} MiB"


def ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1000:,.1f} ms"


def print_json_list(rows: Sequence[BaseModel]) -> None:
    sys.stdout.write(json.dumps([r.model_dump(mode="json") for r in rows], indent=2) + "\n")


def say(msg: str) -> None:
    err.print(escape(msg), style="dim", highlight=False, soft_wrap=True)


def progress(status):
    """A `say` for the API under a spinner: the spinner shows it on a terminal; elsewhere (a log, a CI
    job, a pipe) it is a line on stderr, so a long step never runs without a word."""

    def tell(msg: str) -> None:
        status.update(escape(msg))
        if not err.is_terminal:
            say(msg)

    return tell


def print_trial(r, comparison=None) -> None:
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
        frac = lambda f: "-" if f is None else f"{f:.1%}"  # noqa: E731
        out.print(
            f"[dim]estimate for the same shape ({c.device}):[/dim] peak {mib(c.predicted_peak_memory_bytes)} "
            f"vs measured {mib(c.measured_peak_memory_bytes)} ({c.memory_error:+.1%}); roofline TTFT "
            f"{ms(c.roofline_ttft_s)} ({frac(c.ttft_fraction_of_roofline)} of it reached), time per token "
            f"{ms(c.roofline_tpot_s)} ({frac(c.tpot_fraction_of_roofline)} reached)"
        )
        if c.predicted_reserved_bytes is not None:
            meas = lambda b: "not measured" if b is None else mib(b)  # noqa: E731
            out.print(
                f"[dim]CUDA conventions (estimate vs measured):[/dim] reserved {mib(c.predicted_reserved_bytes)} "
                f"vs {meas(c.measured_reserved_bytes)}; device (NVML, context included) "
                f"{mib(c.predicted_device_bytes)} vs {meas(c.measured_device_bytes)}"
            )
        if c.expected_tpot_s is not None:
            ratio = lambda r: "-" if r is None else f"{r:.2f}"  # noqa: E731
            x = Table(title=f"Expected (estimate) vs measured ({c.expected_basis})")
            for col in ("", "expected", "measured", "expected/measured", "bound (roofline)"):
                x.add_column(col, justify="right")
            x.add_row(
                "TTFT", ms(c.expected_ttft_s), ms(m.ttft_s), ratio(c.ttft_expected_over_measured), ms(c.roofline_ttft_s)
            )
            x.add_row(
                "time per output token",
                ms(c.expected_tpot_s),
                ms(m.tpot_s),
                ratio(c.tpot_expected_over_measured),
                ms(c.roofline_tpot_s),
            )
            out.print(x)
        if c.predicted_layers is not None and c.measured_layers is not None:
            show = lambda d: ", ".join(f"{k}: {v}" for k, v in d.items())  # noqa: E731
            out.print(
                f"[dim]decoder layers per device:[/dim] estimate {show(c.predicted_layers)}; "
                f"loaded {show(c.measured_layers)}"
            )
        for caveat in c.caveats:
            out.print(f"note: {caveat}", style="dim", markup=False)
    for o in r.outputs[:4]:
        text = o.text.strip().replace("\n", " ")
        out.print(
            f"[dim]prompt {o.prompt_index} ({o.input_tokens} in, {len(o.output_token_ids)} out, {o.finish}):[/dim] "
            f"{escape(text[:160])}{'…' if len(text) > 160 else ''}"
        )


def print_profile(path, p) -> None:
    t = Table(title=f"Model profile: {path}", show_header=False)
    for key, value in p.model_dump(exclude={"cache", "layer_types", "layer_mix"}).items():
        t.add_row(key, escape(human.value(value)))  # numbers with separators, mappings as `name value` pairs
    for row in profile_summary(p):
        t.add_row(*row)
    out.print(t)


def profile_summary(p) -> list[tuple[str, str]]:
    """The layer-type mix, KV heads, MLA ranks and experts, in words."""
    rows = [("layer types", ", ".join(f"{n} {kind}" for kind, n in p.layer_mix.items()))]
    for g in p.cache_groups:
        what = f"{g.kv_per_token:,} K+V elements per token" if g.kv_per_token else "no per-token cache"
        if g.window is not None:
            what += f", keeps {g.window:,} tokens"
        if g.state or g.state_fp32:
            what += f", fixed state {g.state:,} + {g.state_fp32:,} fp32 elements per sequence"
        rows.append((f"cache: {g.layers} {g.kind} layers", what))
    rows.append(("KV heads", f"{p.num_kv_heads} of {p.num_attention_heads} attention heads, head_dim {p.head_dim}"))
    if p.kv_lora_rank:
        rows.append(("MLA ranks", f"kv_lora_rank {p.kv_lora_rank} + qk_rope_head_dim {p.qk_rope_head_dim} cached"))
    if p.num_experts:
        rows.append(
            (
                "experts",
                f"{p.num_experts} routed, {p.experts_per_token} active per token, {p.shared_experts} "
                f"shared; {p.active_parameters:,} of {p.num_parameters or 0:,} parameters active",
            )
        )
    return rows


def print_placement(pl) -> None:
    t = Table(title='device_map="auto" placement (estimate): weights placed by max_memory, run-time state added')
    for col in ("device", "budget", "layers", "weights", "KV", "transient", "overhead", "needs"):
        t.add_column(col, justify="left" if col == "device" else "right")
    for d in pl.devices:
        t.add_row(
            d.device,
            gib(d.budget_bytes) if d.budget_bytes is not None else "-",
            str(d.layers),
            gib(d.weights_bytes),
            gib(d.kv_cache_bytes),
            gib(d.transient_bytes),
            gib(d.overhead_bytes),
            gib(d.total_bytes),
        )
    out.print(t)
    if pl.offloaded_layers:
        out.print(
            f"{pl.offloaded_layers} layers ({gib(pl.offloaded_weights_bytes)}) offloaded: brought to "
            f"{pl.compute_device} at every forward pass (see speed)"
            + ("; weights on disk need from_pretrained(..., offload_folder=...)" if pl.disk_weights_bytes else "")
        )


def print_estimate(e) -> None:
    m, sp, s = e.memory, e.speed, e.settings
    out.print(
        f"[bold]Estimate[/bold] (not measured): {e.model}  {s.dtype}, {s.quantization.method} weights, "
        f"{s.kv_cache} KV, {s.attn}; input {s.input_len:,} + output {s.max_new_tokens:,} tokens, batch "
        f"{s.batch}, concurrency {s.concurrency}; on {e.gpus} x {e.accelerator.name} ({e.accelerator.source})"
    )
    t = Table(title="Memory (estimate)")
    for col in ("component", "bytes", "share", "phase", "formula"):
        t.add_column(col, justify="right" if col in ("bytes", "share") else "left")
    for c in m.components:
        t.add_row(c.name, mib(c.bytes), f"{c.bytes / m.total_bytes:.0%}", c.phase, c.formula)
    t.add_row(
        "[bold]peak total[/bold]",
        f"[bold]{mib(m.total_bytes)}[/bold]",
        "",
        "",
        "weights + logits + overhead + max(KV full, KV prompt + prefill transients)",
    )
    out.print(t)
    if e.placement:
        print_placement(e.placement)
    for f in e.fit_details:
        if f.capacity_bytes:
            verdict = "[green]fits[/green]" if f.fits else f"[red]does not fit, short by {gib(-f.headroom_bytes)}[/red]"
            out.print(f"{f.device}: needs {gib(f.needed_bytes)} of {gib(f.capacity_bytes)}: {verdict}")
        else:
            out.print(
                f"{f.device}: holds {gib(f.needed_bytes)} offloaded to " + ("disk" if f.device == "disk" else "CPU RAM")
            )
    out.print(
        f"largest prompt that fits: {e.max_input_len:,}"
        if e.max_input_len
        else "largest prompt that fits: none (weights alone do not fit)"
    )
    out.print(
        f"most concurrent sequences that fit: {e.max_concurrency:,}"
        if e.max_concurrency
        else "most concurrent sequences that fit: none"
    )
    st = Table(title="Speed (estimate): expected, and the roofline bound")
    for col in ("", "prefill", "TTFT", "time per token", "tokens/s", "limited by"):
        st.add_column(col, justify="right")
    if sp.expected:
        x = sp.expected
        st.add_row(
            "expected",
            ms(x.prefill_s),
            ms(x.ttft_s),
            ms(x.tpot_s),
            f"{x.tokens_per_s:,.1f}",
            f"fixed {ms(x.fixed_s_per_step)}/step",
        )
    st.add_row(
        "bound (roofline)",
        ms(sp.prefill_s),
        ms(sp.ttft_s),
        ms(sp.tpot_s),
        f"{sp.tokens_per_s:,.1f}",
        f"{sp.limited_by}; compute-bound from batch {sp.crossover_batch or '> 1024'}",
    )
    out.print(st)
    if sp.expected:
        out.print(f"expected: {sp.expected.basis}")


def print_sweep(results) -> None:
    e0 = results[0]
    out.print(f"[bold]Estimate[/bold] (not measured): memory versus context on {e0.gpus} x {e0.accelerator.name}")
    t = Table()
    for col in (
        "input tokens",
        "weights",
        "KV cache",
        "attn scratch",
        "activations",
        "peak total",
        "fits",
        "TTFT (expected)",
        "tok/s (expected)",
        "tok/s (roofline)",
    ):
        t.add_column(col, justify="right")
    for e in results:
        m = e.memory
        t.add_row(
            f"{e.settings.input_len:,}",
            mib(m.weights_bytes),
            mib(m.kv_cache_bytes),
            mib(m.attention_scratch_bytes),
            mib(m.activations_bytes),
            mib(m.total_bytes),
            "yes" if all(e.fits.values()) else "[red]no[/red]",
            ms(e.speed.expected.ttft_s) if e.speed.expected else "-",
            f"{e.speed.expected.tokens_per_s:,.1f}" if e.speed.expected else "-",
            f"{e.speed.tokens_per_s:,.1f}",
        )
    out.print(t)
    out.print(f"largest prompt that fits: {e0.max_input_len:,}" if e0.max_input_len else "weights alone do not fit")


def print_advice(a) -> None:
    from rich.panel import Panel

    d = a.diagnosis
    w = a.workload
    out.print(
        f"[bold]Advice[/bold] for {escape(a.model)} on {a.hardware['gpus']} x {a.hardware['accelerator']}: "
        f"input {w['input_len']:,} + output {w['max_new_tokens']:,} tokens, batch {w['batch']}, "
        f"concurrency {w['concurrency']}. All numbers are [bold]estimates[/bold] until measured."
    )
    lines = []
    for k, f in enumerate(d.ranked, 1):
        lines.append(f"{k}. [bold]{f.category}[/bold] ({f.severity})")
        lines += [f"   {escape(e)}" for e in f.evidence]
    out.print(Panel("\n".join(lines), title=f"Diagnosis: {d.bottleneck}", border_style="yellow"))
    if a.next:
        r, x = a.next, a.next.expected
        body = [
            f"[bold]{r.technique}[/bold]: {escape(r.title)}",
            escape("sets " + ", ".join(f"{k}={v}" for k, v in r.settings.items())),
            f"peak memory {gib(x.peak_bytes_before)} -> {gib(x.peak_bytes_after)} "
            f"({'fits' if x.fits_after else 'does not fit'}; estimate)",
            f"time per token {ms(x.tpot_s_before)} -> {ms(x.tpot_s_after)}, TTFT {ms(x.ttft_s_before)} -> "
            f"{ms(x.ttft_s_after)}, {x.tokens_per_s_before:,.0f} -> {x.tokens_per_s_after:,.0f} tokens/s (expected)"
            + (
                f"; roofline bound {ms(x.tpot_bound_s_before)} -> {ms(x.tpot_bound_s_after)} per token"
                if x.tpot_bound_s_after is not None
                else ""
            ),
        ]
        if x.note:
            body.append(f"note: {escape(x.note)}")
        body += [f"[dim]{escape(label)}[/dim]" for label in x.factors_after]
        body += [f"[green]measured: {escape(e.line())}[/green]" for e in r.measured]
        body.append(f"quality risk: {escape(r.quality_risk)}")
        if r.needs_hardware:
            body.append(f"[yellow]needs hardware not stated: {escape(r.needs_hardware)}[/yellow]")
        body += [f"trade-off: {escape(t)}" for t in r.tradeoffs]
        body += [f"[yellow]open: {escape(i)}[/yellow]" for i in r.compatibility.issues]
        body += [f"validate: [cyan]{escape(r.validate_cmd)}[/cyan]", f"serve: [cyan]{escape(r.snippet.serve)}[/cyan]"]
        if r.run_file:
            body.append("run file (infertune-run.yaml):\n" + escape(r.run_file.rstrip()))
        body += [f"docs: {escape(u)}" for u in r.docs]
        out.print(Panel("\n".join(body), title="Next: one change", border_style="green"))
        out.print(Panel(Text(r.snippet.python.rstrip()), title="Python", border_style="dim"))
    else:
        out.print(
            Panel("no compatible technique helps; see the workload trade-offs below", title="Next", border_style="red")
        )
    if len(a.recommendations) > 1:
        t = Table(title="Other candidates (ranked, estimates)")
        for col in ("technique", "sets", "peak after", "fits", "ms/token after", "quality risk", "needs"):
            t.add_column(col)
        for r in a.recommendations[1:]:
            t.add_row(
                r.technique,
                ", ".join(f"{k}={v}" for k, v in r.settings.items() if k != "max_memory"),
                gib(r.expected.peak_bytes_after),
                "yes" if r.expected.fits_after else "no",
                f"{r.expected.tpot_s_after * 1e3:,.2f}",
                r.quality_risk,
                r.needs_hardware or "",
            )
        out.print(t)
    if a.rejected:
        t = Table(title="Rejected (incompatible)")
        t.add_column("technique")
        t.add_column("why")
        for r in a.rejected:
            t.add_row(r.technique, escape("; ".join(r.reasons)))
        out.print(t)
    for wt in a.workload_tradeoffs:
        out.print(f"[magenta]workload trade-off[/magenta] ({escape(wt.change)}): {escape(wt.note)}")
    for s in a.assumptions:
        out.print(f"assumption: {s}", style="dim", markup=False)
    for q in a.questions:
        out.print(f"question: {q}", style="dim", markup=False)


def print_load(res) -> None:
    t = Table(title=f"Load test (measured): {res.url}{res.endpoint}, {res.max_new_tokens} tokens per request")
    open_loop = any(lv.rate is not None for lv in res.levels)
    cols = ("rate", "peak", "ok", "fail") if open_loop else ("conc", "ok", "fail")
    for col in (*cols, "TTFT p50", "TTFT p95", "ITL p50", "ITL p95", "tok/s", "req/s", "SLO"):
        t.add_column(col, justify="right")

    def msec(v):
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
