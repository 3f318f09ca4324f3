"""What the verbs that answer without running the model print (`infertune.cli.plan`, and doctor --advise):
a model profile, an estimate with its placement, a memory sweep over context lengths, and advice."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from infertune.cli.output import gib, mib, ms, out
from infertune.core import human
from infertune.estimate.bands import describe

if TYPE_CHECKING:
    from infertune.advisor.advise import Advice
    from infertune.estimate import Estimate
    from infertune.estimate.placement import Placement
    from infertune.probe.model import ModelProfile


def print_profile(path: str | Path, p: ModelProfile) -> None:
    t = Table(title=f"Model profile: {path}", show_header=False)
    for key, value in p.model_dump(exclude={"cache", "layer_types", "layer_mix"}).items():
        t.add_row(key, escape(human.value(value)))  # numbers with separators, mappings as `name value` pairs
    for row in profile_summary(p):
        t.add_row(*row)
    out.print(t)


def profile_summary(p: ModelProfile) -> list[tuple[str, str]]:
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


def print_placement(pl: Placement) -> None:
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


def print_estimate(e: Estimate) -> None:
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
        x = sp.expected
        out.print(f"expected TTFT {ms(x.ttft_s)}: {describe(sp.band_ttft, sp.kind_ttft)}")
        out.print(f"expected {ms(x.tpot_s)}/token: {describe(sp.band_tpot, sp.kind_tpot)}")


def print_sweep(results: Sequence[Estimate]) -> None:
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


def print_advice(a: Advice) -> None:
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
        for no in a.rejected:
            t.add_row(no.technique, escape("; ".join(no.reasons)))
        out.print(t)
    for wt in a.workload_tradeoffs:
        out.print(f"[magenta]workload trade-off[/magenta] ({escape(wt.change)}): {escape(wt.note)}")
    for s in a.assumptions:
        out.print(f"assumption: {s}", style="dim", markup=False)
    for q in a.questions:
        out.print(f"question: {q}", style="dim", markup=False)
