"""tune (with its live table), demo and report: the measured loop and what it leaves behind."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from infertune.cli.app import (
    BatchOpt,
    FormatOpt,
    InputLenOpt,
    MaxNewTokensOpt,
    ModelOpt,
    RepeatsOpt,
    TrustOpt,
    WarmupOpt,
)
from infertune.cli.output import err, ms, out, say
from infertune.cli.quick import Format, print_json
from infertune.core.errors import UserError


def _step_line(s, objective: str) -> str:
    """One line for a finished tune step (what a log shows instead of the live table)."""
    from infertune.core import human

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
    )


def _run_tune(start, fmt: Format = Format.table, spec=None) -> None:
    """`start(on_event)` runs api.tune; this shows the table so far and the trial in flight, then the result.
    Ctrl-C (or SIGTERM) stops the trial cleanly and says how to resume."""
    import contextlib
    import signal

    from rich.live import Live

    lines = not err.is_terminal  # a log, a pipe, CI: one line per finished step instead of a live table
    title = f"tune: {spec.objective} (measured; {spec.max_trials} trials at most)" if spec else "tune (measured)"
    state: dict = {"now": "starting", "rows": [], "run": None, "title": title}

    def view():
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
                f"{m.peak_memory_bytes / 2**20:,.0f}" if m else "-",
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

    def on_event(e: dict) -> None:
        if e.get("event") == "run":
            state["run"] = e["path"]
            say(f"run directory: {e['path']}")
        elif e.get("event") == "step":
            state["rows"].append(e["step"])
        elif e.get("event") == "trial":
            state["now"] = f"trial {e['index']}: {e['setup'].dtype}, {e['setup'].attn}, {e['setup'].kv_cache} KV" + (
                f" ({e['role']}, pair {e['repeat']})" if e.get("role") in ("candidate", "incumbent") else ""
            )
        elif e.get("event") == "phase":
            state["now"] = state["now"].split(" [")[0] + f" [{e['phase']}]"
        elif e.get("event") == "progress":
            state["now"] = state["now"].split(" [")[0] + f" [generate {e['done']}/{e['total']}]"
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
        elif not lines:
            live.update(view())

    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops like Ctrl-C
    try:
        live = contextlib.nullcontext() if lines else Live(view(), console=err, refresh_per_second=4, transient=False)
        with live:
            outcome = start(on_event)
            state["now"] = f"done: {len(outcome.steps)} trials" + (
                f", {len(outcome.served)} served" if outcome.served else ""
            )
            if not lines:
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


def served_table(r: dict) -> Table:
    """The serve stage on the terminal: every variant on the same load (measured), engines not installed with
    their install command."""
    from infertune.core import human

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
            f"{v['peak_memory_bytes'] / 2**20:,.0f}" if v["peak_memory_bytes"] else "-",
            f"{lv['output_tokens_per_s']:,.1f}",
            f"{ms(lv['ttft_s']['p50'])} / {ms(lv['ttft_s']['p95'])}",
            ms(lv["e2e_s"]["p50"]),
            obj,
            verdict,
        )
    return t


def tune(
    workload: Annotated[Path | None, typer.Argument(help="workload file (YAML, TOML or JSON)")] = None,
    model: ModelOpt = None,
    revision: str | None = None,
    max_new_tokens: MaxNewTokensOpt = None,
    input_len: InputLenOpt = None,
    batch: BatchOpt = None,
    repeats: RepeatsOpt = None,
    warmup: WarmupOpt = None,
    seed: int | None = None,
    dtype: Annotated[str | None, typer.Option(help="starting dtype (default: the checkpoint's)")] = None,
    attn: Annotated[str | None, typer.Option(help="starting attention (default: sdpa)")] = None,
    kv_cache: Annotated[
        str | None, typer.Option(help="starting KV cache: dynamic, static, quantized, offloaded")
    ] = None,
    concurrency: Annotated[int | None, typer.Option(help="requests arriving together, per round")] = None,
    batching: Annotated[
        str | None,
        typer.Option(help="how concurrent requests run at the start: serial (default), static or continuous"),
    ] = None,
    output: Annotated[Path | None, typer.Option(help="run directory (default: ./infertune-runs/tune-TIME)")] = None,
    resume: Annotated[Path | None, typer.Option(help="continue the run in this directory")] = None,
    max_trials: Annotated[
        int | None,
        typer.Option(
            help="steps at most, baseline included (each later step runs 3-5 interleaved pairs of trials) [default: 8]"
        ),
    ] = None,
    time_budget: Annotated[float | None, typer.Option(help="seconds of trials at most")] = None,
    objective: Annotated[str | None, typer.Option(help="memory, latency or throughput [default: latency]")] = None,
    max_memory: Annotated[str | None, typer.Option(help="peak memory limit: 512MiB, 20GB, or bytes")] = None,
    max_ttft: Annotated[float | None, typer.Option(help="TTFT limit, seconds")] = None,
    max_tpot: Annotated[float | None, typer.Option(help="time per output token limit, seconds")] = None,
    min_quality: Annotated[
        float | None, typer.Option(help="least share of prompts with the baseline's greedy output")
    ] = None,
    max_nll_delta: Annotated[float | None, typer.Option(help="most reference NLL increase, nats/token (0.05)")] = None,
    max_kl: Annotated[float | None, typer.Option(help="most next-token KL vs the baseline, nats (0.5)")] = None,
    trial_timeout: Annotated[
        float | None, typer.Option(help="seconds per trial before it is stopped [default: 900]")
    ] = None,
    trial_memory_limit: Annotated[
        str | None,
        typer.Option(help="the most one trial may allocate (8GB): past it that trial is 'oom' and the run goes on"),
    ] = None,
    serve: Annotated[
        bool | None,
        typer.Option(
            "--serve/--no-serve",
            help="then serve the result with transformers serve, with and without continuous "
            "batching, and with every installed engine (vLLM), load-test each on the same requests and ship the measured "
            "winner (default: when concurrency > 1)",
        ),
    ] = None,
    trust_remote_code: TrustOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Measure the baseline, then one change at a time; keep what helps without hurting quality; report."""
    from infertune import api
    from infertune.core.paths import check_output

    check_output(output, "dir")
    check_output(resume, "run", "--resume")

    if resume is not None:  # the run goes on as specified: a flag that would change it is refused
        from infertune.tuning.run import Run

        given = dict(
            model=model,
            revision=revision,
            max_new_tokens=max_new_tokens,
            input_len=input_len,
            batch=batch,
            repeats=repeats,
            warmup=warmup,
            seed=seed,
            dtype=dtype,
            attn=attn,
            kv_cache=kv_cache,
            concurrency=concurrency,
            batching=batching,
            max_trials=max_trials,
            time_budget=time_budget,
            objective=objective,
            max_memory=max_memory,
            max_ttft=max_ttft,
            max_tpot=max_tpot,
            min_quality=min_quality,
            max_nll_delta=max_nll_delta,
            max_kl=max_kl,
            trial_timeout=trial_timeout,
            trial_memory_limit=trial_memory_limit,
            serve=serve,
        )
        api.resume_only(resume, workload=workload, output=output, **given)
        _run_tune(
            lambda on_event: api.tune(resume=resume, trust_remote_code=trust_remote_code, on_event=on_event),
            fmt,
            Run(resume).spec(),
        )
        return
    spec, facts = api.tune_spec(
        workload,
        model,
        revision,
        max_new_tokens,
        input_len,
        batch,
        repeats,
        warmup,
        seed,
        dtype,
        attn,
        kv_cache,
        concurrency,
        batching,
        max_trials,
        time_budget,
        objective,
        max_memory,
        max_ttft,
        max_tpot,
        min_quality,
        max_nll_delta,
        max_kl,
        trial_timeout,
        serve,
        trust_remote_code,
        trial_memory_limit,
        say=say,
    )
    _start_run(spec, facts, output, "tune", fmt)


def _start_run(spec, facts, output: Path | None, prefix: str, fmt: Format = Format.table) -> None:
    from infertune import api
    from infertune.tuning.run import Run

    run = Run.create(output or api.default_run_dir(prefix), spec)

    def start(on_event):
        on_event({"event": "run", "path": str(run.path)})
        return api.run_tune(run, facts, on_event)

    _run_tune(start, fmt, spec)


def demo(output: Annotated[Path | None, typer.Option(help="run directory")] = None) -> None:
    """Prepare the embedded model and tune a chat workload on it, starting from a naive script's settings
    (fp32, eager attention): a few minutes on 2 CPU cores."""
    from infertune import api
    from infertune.core.paths import check_output
    from infertune.core.workload import Workload
    from infertune.models import store
    from infertune.probe.model import profile_model
    from infertune.techniques import Setup
    from infertune.tuning.run import TuneSpec

    check_output(output, "dir")
    path = store.prepare("smollm2", say=say)
    wl = Workload(model="demo", max_new_tokens=32)
    spec = TuneSpec(
        model="demo",
        model_path=str(path),
        workload=wl,
        start=Setup(dtype="float32", attn="eager"),
        objective="latency",
        max_trials=4,
        trial_timeout_s=600,
    )
    _start_run(spec, api.host_facts(spec, profile_model(path)), output, "demo")


def report(
    run_dir: Annotated[Path, typer.Argument(help="a tune run directory")],
    fmt: Annotated[str, typer.Option("--format", help="md (report.md) or json (report.json)")] = "md",
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild", help="rewrite the report from results.jsonl first (an interrupted run's finished trials)"
        ),
    ] = False,
) -> None:
    """Print a tune run's report; --rebuild writes it from the finished trials (after an interrupted run)."""
    from infertune import api

    if fmt not in ("md", "json"):
        raise UserError("--format: md or json")
    r = api.report(run_dir, rebuild=rebuild)
    if fmt == "json":
        print_json(r)
    else:
        sys.stdout.write((Path(run_dir) / "report.md").read_text(encoding="utf-8"))
