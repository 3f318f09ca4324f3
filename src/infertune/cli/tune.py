"""tune, demo and report: the verbs of the measured loop and what it leaves behind (how a run is shown
while it goes: `infertune.cli.tune_output`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

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
from infertune.cli.output import say
from infertune.cli.quick import Format, print_json
from infertune.cli.tune_output import show_run
from infertune.core.errors import UserError

if TYPE_CHECKING:
    from infertune.api import OnEvent, TuneOutcome
    from infertune.measure.cluster import TrialFn
    from infertune.techniques import Facts
    from infertune.tuning.run import TuneSpec


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
            "batching, and with every installed engine (vLLM), load-test each on the same requests "
            "and ship the measured winner (default: when concurrency > 1)",
        ),
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(help="run each trial as a task on a Ray cluster: ray (RAY_ADDRESS or a local one) or ray=ADDRESS"),
    ] = None,
    trust_remote_code: TrustOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Measure the baseline, then one change at a time; keep what helps without hurting quality; report."""
    from infertune import api
    from infertune.core.paths import check_output
    from infertune.measure.cluster import check_cluster, executor_for

    check_output(output, "dir")
    check_output(resume, "run", "--resume")
    # the flag over the run file's cluster:, refused in one line before anything runs (no Ray, a bad value)
    cluster = check_cluster(cluster, None if resume is not None else workload)

    if resume is not None:  # the run goes on as specified: a flag that would change it is refused
        from infertune.tuning.run import Run

        given = {
            "model": model,
            "revision": revision,
            "max_new_tokens": max_new_tokens,
            "input_len": input_len,
            "batch": batch,
            "repeats": repeats,
            "warmup": warmup,
            "seed": seed,
            "dtype": dtype,
            "attn": attn,
            "kv_cache": kv_cache,
            "concurrency": concurrency,
            "batching": batching,
            "max_trials": max_trials,
            "time_budget": time_budget,
            "objective": objective,
            "max_memory": max_memory,
            "max_ttft": max_ttft,
            "max_tpot": max_tpot,
            "min_quality": min_quality,
            "max_nll_delta": max_nll_delta,
            "max_kl": max_kl,
            "trial_timeout": trial_timeout,
            "trial_memory_limit": trial_memory_limit,
            "serve": serve,
        }
        api.resume_only(resume, workload=workload, output=output, **given)
        show_run(
            lambda on_event: api.tune(
                resume=resume, trust_remote_code=trust_remote_code, on_event=on_event, cluster=cluster
            ),
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
    _start_run(spec, facts, output, "tune", fmt, executor_for(cluster))


def _start_run(
    spec: TuneSpec,
    facts: Facts,
    output: Path | None,
    prefix: str,
    fmt: Format = Format.table,
    executor: TrialFn | None = None,
) -> None:
    from infertune import api
    from infertune.tuning.run import Run

    run = Run.create(output or api.default_run_dir(prefix), spec)

    def start(on_event: OnEvent) -> TuneOutcome:
        on_event({"event": "run", "path": str(run.path)})
        return api.run_tune(run, facts, on_event, executor)

    show_run(start, fmt, spec)


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
