"""How a tune run is shown: the live table while it runs (one line per finished step in a log), then the
steps, the serve stage's table and what to ship."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from infertune.cli.output import err, ms, out, say
from infertune.cli.quick import Format, print_json
from infertune.core import human

if TYPE_CHECKING:
    from infertune.api import OnEvent, TuneOutcome
    from infertune.tuning.run import Step, TuneSpec


def _step_line(s: Step, objective: str) -> str:
    """One line for a finished tune step (what a log shows instead of the live table)."""
    m = s.trial.metrics
    verdict = getattr(s, "verdict", None) or ("kept" if s.accepted else "rejected")
    shown = (
        ""
        if m is None
        else (
            f"; {human.objective(objective, s.objective)}, peak {human.size(m.peak_memory_bytes)}"
            f", TTFT {human.duration(m.ttft_s)}, {human.rate(m.tokens_per_s)}"
        )
    )
    return (
        f"step {s.index} ({s.technique or 'baseline'}): "
        f"{verdict if s.trial.status == 'ok' else s.trial.status}{shown}: {s.reason}"
        + (f" ({s.stopped})" if s.stopped else "")
        + (f" (noise floor ±{s.noise_floor:.1%}, from a pilot repeat)" if s.noise_floor is not None else "")
    )


def show_run(start: Callable[[OnEvent], TuneOutcome], fmt: Format = Format.table, spec: TuneSpec | None = None) -> None:
    """`start(on_event)` runs api.tune; this shows the table so far and the trial in flight, then the result.
    Ctrl-C (or SIGTERM) stops the trial cleanly and says how to resume."""
    import contextlib
    import signal

    from rich.live import Live

    lines = not err.is_terminal  # a log, a pipe, CI: one line per finished step instead of a live table
    title = f"tune: {spec.objective} (measured; {spec.max_trials} trials at most)" if spec else "tune (measured)"
    state: dict[str, Any] = {"now": "starting", "rows": [], "run": None, "title": title}
    live: Live | None = None  # the live table, on a terminal

    def view() -> Table:
        t = Table(title=state["title"])
        for col in ("#", "change", "peak MiB", "TTFT ms", "ms/tok", "tok/s", "match", "Δ ± noise", "pairs", "verdict"):
            t.add_column(col, no_wrap=True, justify="left" if col in ("change", "verdict") else "right")
        busy = False
        for s in state["rows"]:
            m = s.trial.metrics
            q = s.quality
            load = s.machine or s.trial.machine
            busy = busy or bool(load and load.busy)
            verdict = s.verdict or ("baseline" if s.accepted else s.trial.status)
            verdict += " (adopted)" if s.accepted and s.verdict == "inconclusive" else ""
            band = "-" if s.delta is None else f"{s.delta:+.1%}" + (f" ± {s.noise:.1%}" if s.noise is not None else "")
            t.add_row(
                str(s.index),
                s.technique or "baseline",
                f"{m.peak_memory_bytes / human.MiB:,.0f}" if m else "-",
                f"{m.ttft_s * 1e3:,.0f}" if m else "-",
                f"{m.tpot_s * 1e3:,.1f}" if m and m.tpot_s else "-",
                f"{m.tokens_per_s:,.1f}" if m else "-",
                f"{q.exact_match_rate:.0%}" if q else "-",
                band,
                str(len(s.pairs) if s.technique else 1),
                verdict + (" [busy]" if load and load.busy else ""),
            )
        t.caption = state["now"] + (
            "  [yellow]machine busy: timings swing, decided only above the noise[/yellow]" if busy else ""
        )
        return t

    def on_event(e: dict[str, Any]) -> None:
        if e.get("event") == "run":
            state["run"] = e["path"]
            say(f"run directory: {e['path']}")
        elif e.get("event") == "step":
            state["rows"].append(e["step"])
        elif e.get("event") == "trial":
            state["now"] = f"trial {e['index']}: {e['setup'].dtype}, {e['setup'].attn}, {e['setup'].kv_cache} KV" + (
                f" ({e['role']}, pair {e['repeat']})" if e.get("role") not in (None, "baseline", "pilot") else ""
            )
        elif e.get("event") == "phase":
            state["now"] = state["now"].split(" [")[0] + f" [{e['phase']}]"
        elif e.get("event") == "progress":
            state["now"] = state["now"].split(" [")[0] + f" [generate {e['done']}/{e['total']}]"
        elif e.get("event") == "confirm":
            c = e["confirmation"]
            state["now"] = f"confirmed at the end: {c.reason} ({c.stopped})"
            say(state["now"])
        elif e.get("event") == "serve":
            state["now"] = (
                f"{e['label']}: start-up and load test (an engine compiles first: minutes)"
                if e.get("engine", "transformers") != "transformers"
                else f"{e['label']}: load test"
            )
            if lines:
                say(state["now"])
        if lines and e.get("event") == "step":
            say(_step_line(e["step"], spec.objective if spec else "latency"))
        elif live is not None:
            live.update(view())

    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops like Ctrl-C
    try:
        if not lines:
            live = Live(view(), console=err, refresh_per_second=4, transient=False)
        with live or contextlib.nullcontext():
            outcome = start(on_event)
            state["now"] = f"done: {len(outcome.steps)} trials" + (
                f", {len(outcome.served)} served" if outcome.served else ""
            )
            if live is not None:
                live.update(view())
        err.print()
    except KeyboardInterrupt:
        if state["run"]:
            err.print(
                f"[yellow]interrupted: finished trials are in {state['run']}/results.jsonl; continue with "
                f"`infertune tune --resume {state['run']}`[/yellow]"
            )
        raise typer.Exit(130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    for w in outcome.warnings:
        err.print(f"warning: {w}", style="yellow", markup=False, highlight=False, soft_wrap=True)
    if fmt is Format.json:
        print_json(outcome)
        return
    r = outcome.report
    for s in outcome.steps:
        out.print(
            f"step {s.index} ({s.technique or 'baseline'}): {s.verdict or ('kept' if s.accepted else 'rejected')}"
            f"{' (adopted on the tie)' if s.accepted and s.verdict == 'inconclusive' else ''}: {s.reason}",
            markup=False,
            highlight=False,
        )
        m = s.trial.metrics
        if s.expected is not None and m is not None and m.tpot_s:  # the estimate it was chosen on, beside the trial
            x = s.expected
            out.print(
                f"  time per token expected {ms(x.tpot_s_after)} vs measured {ms(m.tpot_s)} (expected/measured "
                f"{x.tpot_s_after / m.tpot_s:.2f}); TTFT expected {ms(x.ttft_s_after)} vs measured {ms(m.ttft_s)}",
                markup=False,
                highlight=False,
            )
    if r.get("served"):
        out.print(served_table(r))
        if r.get("serve_decision"):
            out.print(f"serve stage: {r['serve_decision']}", markup=False, highlight=False)
    env = r.get("environment") or {}
    if env.get("busy"):
        out.print(
            f"[yellow]the machine was busy during this run ({escape('; '.join(env['busy_reasons']))}): steps "
            "were decided only on differences above the noise they measured[/yellow]"
        )
    best = r["best"]
    if best:
        kept = ", ".join(s["technique"] for s in r["steps"] if s["accepted"] and s["technique"])
        out.print(f"accepted: {kept or 'none (the baseline stays)'}")
        out.print(f"ship it: [cyan]{escape(best['serve'])}[/cyan]")
    out.print(f"report: {Path(outcome.run_dir) / 'report.md'} (also report.html, report.json)")


def served_table(r: dict[str, Any]) -> Table:
    """The serve stage on the terminal: every variant on the same load (measured), engines not installed with
    their install command."""
    conc = r["workload"]["concurrency"]
    t = Table(title=f"served at concurrency {conc}, same requests for each (measured)")
    for col in (
        "variant",
        "start-up s",
        "peak MiB",
        "tok/s",
        "TTFT p50/p95",
        "e2e p50",
        f"{r['objective']} ± spread",
        "verdict",
    ):
        t.add_column(col, justify="left" if col in ("variant", "verdict") else "right")
    for v in r["served"]:
        if v["status"] != "ok":
            what = (
                v["error"]
                if v["status"] == "failed"
                else f"not measured: {v['install']}" + ("" if v["error"] == "not installed" else f" ({v['error']})")
            )
            t.add_row(v["label"], "-", "-", "-", "-", "-", "-", what)
            continue
        lv = v["at_concurrency"]
        obj = (
            "-"
            if v["objective"] is None
            else human.objective(r["objective"], v["objective"])
            + (f" ± {v['spread']:.0%}" if v["spread"] is not None else "")
        )
        verdict = v["verdict"] + (f" ({'; '.join(v['slo_missed'])})" if v["slo_missed"] else "")
        t.add_row(
            v["label"],
            f"{v['startup_s']:,.1f}" if v["startup_s"] is not None else "-",
            f"{v['peak_memory_bytes'] / human.MiB:,.0f}" if v["peak_memory_bytes"] else "-",
            f"{lv['output_tokens_per_s']:,.1f}",
            f"{ms(lv['ttft_s']['p50'])} / {ms(lv['ttft_s']['p95'])}",
            ms(lv["e2e_s"]["p50"]),
            obj,
            verdict,
        )
    return t
