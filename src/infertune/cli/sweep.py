"""sweep: one trial of every configuration of a grid (and of several models), fanned out over a Ray cluster."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from infertune.cli.app import FormatOpt, InputLenOpt, MaxNewTokensOpt, RepeatsOpt, TrustOpt, WarmupOpt
from infertune.cli.output import say
from infertune.cli.quick import Format, print_json

if TYPE_CHECKING:
    from infertune.api import SweepOutcome


def sweep(
    workload: Annotated[Path | None, typer.Argument(help="workload file (YAML, TOML or JSON)")] = None,
    model: Annotated[
        list[str] | None, typer.Option(help="a model to sweep (repeat for several): Hub id or local folder")
    ] = None,
    grid: Annotated[
        list[str] | None,
        typer.Option(
            help="KNOB=VALUE,VALUE: the values of one knob to try (repeat for several knobs: every combination)"
        ),
    ] = None,
    objective: Annotated[str | None, typer.Option(help="memory, latency or throughput [default: latency]")] = None,
    max_new_tokens: MaxNewTokensOpt = None,
    input_len: InputLenOpt = None,
    batch: Annotated[int | None, typer.Option(help="prompts per generate call")] = None,
    repeats: RepeatsOpt = None,
    warmup: WarmupOpt = None,
    dtype: Annotated[str | None, typer.Option(help="dtype where the grid does not list it")] = None,
    attn: Annotated[str | None, typer.Option(help="attention where the grid does not list it")] = None,
    trial_timeout: Annotated[float | None, typer.Option(help="seconds per trial [default: 900]")] = None,
    output: Annotated[Path | None, typer.Option(help="run directory (default: ./infertune-runs/sweep-TIME)")] = None,
    resume: Annotated[Path | None, typer.Option(help="continue the sweep in this directory")] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            help="run the trials side by side on a Ray cluster: ray (RAY_ADDRESS or a local one) or ray=ADDRESS"
        ),
    ] = None,
    trust_remote_code: TrustOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Measure every configuration of a grid (one trial each), side by side on a cluster's devices; rank them."""
    from infertune import api

    given = {
        "models": model,
        "grid": grid,
        "objective": objective,
        "max_new_tokens": max_new_tokens,
        "input_len": input_len,
        "batch": batch,
        "repeats": repeats,
        "warmup": warmup,
        "dtype": dtype,
        "attn": attn,
        "trial_timeout": trial_timeout,
    }
    if resume is None:
        given["trust_remote_code"] = trust_remote_code

    def on_event(e: dict) -> None:
        if e.get("event") == "point":
            p = e["point"]
            where = ((p.trial.environment or {}).get("placement") or {}).get("device") or ""
            say(f"[{p.index}] {p.model} {p.changes}: {p.trial.status} {where}".rstrip())

    out = api.sweep(workload, output=output, resume=resume, cluster=cluster, on_event=on_event, say=say, **given)
    if fmt == Format.json:
        print_json(out)
    else:
        show(out)


def show(out: SweepOutcome) -> None:
    """The ranking, one table per device model (configurations measured on different device models are never
    ranked against each other)."""
    points = {p.index: p for p in out.points}
    unit = {"latency": "s", "memory": "bytes", "throughput": "tokens/s"}[out.objective]
    for device, order in out.ranking.items():
        sys.stdout.write(f"\n{device}: {out.objective} ({unit}), best first\n")
        for rank, i in enumerate(order, 1):
            p = points[i]
            value = f"{p.objective:.4g}" if p.objective is not None else f"{p.trial.status}: {p.trial.error or ''}"
            knobs = ", ".join(f"{k}={v}" for k, v in p.changes.items())
            sys.stdout.write(f"{rank:>3}. [{i}] {p.model} {knobs}  {value}\n")
    sys.stdout.write(f"\nrun directory: {out.run_dir}\n")
