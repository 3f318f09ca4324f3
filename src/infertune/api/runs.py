"""The verbs that run the model: measure (one trial), tune (the loop, durable in a run directory), report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from infertune.api.common import OnEvent, Say, default_run_dir, input_lengths, parse_budgets, parse_size_flag, quiet
from infertune.core import validate
from infertune.core.errors import UserError, flag
from infertune.core.paths import check_output
from infertune.core.schema import SCHEMA_VERSION
from infertune.measure.cluster import TrialFn, check_cluster, executor_for
from infertune.models.hub import REVISION_DOC, hub_id, revision_of
from infertune.tuning.run import Constraints, Run, ServeStep, Step, TuneSpec

if TYPE_CHECKING:
    from infertune.advisor.predicted import Measurement
    from infertune.probe.model import ModelProfile
    from infertune.techniques import Facts

# --- measure ----------------------------------------------------------------------------------------------


def measure(
    workload: str | Path | None = None,
    model: str | None = None,
    revision: str | None = None,
    max_new_tokens: int | None = None,
    input_len: str | int | list[int] | None = None,
    batch: int | None = None,
    repeats: int | None = None,
    warmup: int | None = None,
    seed: int | None = None,
    dtype: str | None = None,
    attn: str | None = None,
    kv_cache: str | None = None,
    device: str | None = None,
    concurrency: int | None = None,
    batching: str | None = None,
    max_batch_tokens: int | None = None,
    cb_block_size: int | None = None,
    cb_num_blocks: int | None = None,
    trust_remote_code: bool = False,
    timeout: float = 900.0,
    memory_limit: str | int | None = None,
    tp: int = 1,
    device_map: str | None = None,
    max_memory: str | dict[str, str] | None = None,
    tp_plan: str = "auto",
    on_event: OnEvent | None = None,
    say: Say = quiet,
) -> Measurement:
    """One configuration on one workload, in an isolated child process: a `Measurement` (the trial's
    result, measured, with the estimate for the same shape beside it). A failed trial is a result too."""
    from infertune.advisor.predicted import Measurement, compare
    from infertune.core.config import config_from
    from infertune.core.workload import load_run
    from infertune.measure import run_trial
    from infertune.models import store

    validate.check(
        max_new_tokens=max_new_tokens,
        batch=batch,
        repeats=repeats,
        warmup=warmup,
        seed=seed,
        concurrency=concurrency,
        max_batch_tokens=max_batch_tokens,
        cb_block_size=cb_block_size,
        cb_num_blocks=cb_num_blocks,
        timeout=timeout,
        tp=tp,
    )
    validate.choice("tp_plan", tp_plan, ("auto", "mlp"))
    wl, cfg_data = load_run(
        workload,
        model=model,
        revision=revision,
        max_new_tokens=max_new_tokens,
        **input_lengths(input_len),
        batch=batch,
        repeats=repeats,
        warmup=warmup,
        seed=seed,
        concurrency=concurrency,
    )
    if isinstance(max_memory, str):
        max_memory = parse_budgets(max_memory)
    cfg = config_from(
        cfg_data,
        "config",
        dtype=dtype,
        attn_implementation=attn,
        cache_implementation=kv_cache,
        device=device,
        trust_remote_code=trust_remote_code or None,
        batching=batching,
        max_batch_tokens=max_batch_tokens,
        cb_block_size=cb_block_size,
        cb_num_blocks=cb_num_blocks,
        tp_size=tp if tp != 1 else None,
        device_map=device_map,
        max_memory=max_memory,
    )
    memory_limit_bytes = parse_size_flag(memory_limit, "--memory-limit")
    if tp_plan != "auto" and cfg.tp_size == 1:
        raise UserError("--tp-plan applies to tensor parallelism: give --tp N too")
    if tp_plan == "mlp":  # the flag over the run file's plan
        cfg = cfg.model_copy(update={"tp_plan": "mlp"})
    check_device(cfg.device)
    remote = hub_id(wl.model)
    if remote:  # huggingface_hub draws its own progress bar: a phase, so a spinner can step aside
        (on_event or (lambda e: None))({"event": "phase", "phase": "download"})
    path = store.resolve(wl.model, wl.revision, say=say, weights=True, checksums=True)
    if remote:
        (on_event or (lambda e: None))({"event": "phase", "phase": "start"})
    if cfg.tp_size > 1:  # refuse before launching ranks that cannot split the model
        from infertune.probe.model import mlp_only_tp_plan, profile_model
        from infertune.techniques.parallel import tp_problems

        plan = "auto" if cfg.tp_plan == "auto" else "mlp"  # a dict of overrides: checked as the MLP-only plan
        problems = tp_problems(profile_model(path, cfg.trust_remote_code), cfg.tp_size, plan)
        if problems:
            raise UserError(f"--tp {cfg.tp_size}: " + "; ".join(problems))
        if cfg.tp_plan == "mlp":  # the rules for this model's own plan keys, in the result
            cfg = cfg.model_copy(update={"tp_plan": mlp_only_tp_plan(str(path), cfg.trust_remote_code)})
    result = run_trial(cfg, wl, path, timeout_s=timeout, on_event=on_event, memory_limit_bytes=memory_limit_bytes)
    (on_event or (lambda e: None))({"event": "phase", "phase": "estimate"})
    try:  # the estimate beside the measurement; a failure here never costs the measurement
        comparison = compare(result)
    except Exception as e:
        say(f"no estimate for this trial: {type(e).__name__}: {e}")
        comparison = None
    return Measurement(**result.model_dump(), estimate=comparison)


def check_device(device: str | None) -> None:
    """A named device this machine has, or one line before any trial (a trial would only fail inside)."""
    if device is None or device == "cpu":
        return
    from infertune.probe.hardware import _mps_available, detect_gpus

    if device == "mps":
        if not _mps_available():
            raise UserError("--device mps: no Apple GPU (MPS) here; use cpu" + (", cuda" if detect_gpus() else ""))
        return
    gpus = detect_gpus()
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= len(gpus):
        have = f"CUDA devices here: {', '.join(f'cuda:{g.index}' for g in gpus)}" if gpus else "no CUDA device here"
        raise UserError(f"--device {device}: {have}; nearest valid: {f'cuda:{len(gpus) - 1}' if gpus else 'cpu'}")


# --- tune -------------------------------------------------------------------------------------------------


class TuneOutcome(BaseModel):
    kind: Literal["tune"] = "tune"
    schema_version: str = SCHEMA_VERSION
    run_dir: str
    steps: list[Step]  # measured, one per trial
    served: list[ServeStep] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    report: dict[str, Any]  # report.json: the accepted configuration, its code and serve command
    model_revision: str | None = Field(None, description=REVISION_DOC)


def host_facts(spec: TuneSpec, profile: ModelProfile) -> Facts:
    """Facts for the machine the trials run on (this one), with the workload's shape."""
    from infertune.advisor import intake

    acc, _ = intake.target_hardware(None, None)
    wl = spec.workload
    i = intake.build(
        profile,
        spec.model_path,
        acc,
        True,
        input_len=wl.longest_input or 64,
        max_new_tokens=wl.max_new_tokens,
        batch=wl.batch,
        concurrency=wl.concurrency,
        batching=spec.start.batching,
    )
    return i.facts


def tune_spec(
    workload: str | Path | None = None,
    model: str | None = None,
    revision: str | None = None,
    max_new_tokens: int | None = None,
    input_len: str | int | list[int] | None = None,
    batch: int | None = None,
    repeats: int | None = None,
    warmup: int | None = None,
    seed: int | None = None,
    dtype: str | None = None,
    attn: str | None = None,
    kv_cache: str | None = None,
    concurrency: int | None = None,
    batching: str | None = None,
    max_trials: int | None = None,
    time_budget: float | None = None,
    objective: str | None = None,
    max_memory: str | int | None = None,
    max_ttft: float | None = None,
    max_tpot: float | None = None,
    min_quality: float | None = None,
    max_nll_delta: float | None = None,
    max_kl: float | None = None,
    trial_timeout: float | None = None,
    serve: bool | None = None,
    trust_remote_code: bool = False,
    trial_memory_limit: str | int | None = None,
    min_pairs: int | None = None,
    max_pairs: int | None = None,
    say: Say = quiet,
) -> tuple[TuneSpec, Facts]:
    """The validated TuneSpec and host Facts for a new run (refused before any trial when impossible).
    Not given (None): max_trials 8, objective latency, trial_timeout 900 s, 3 to 5 interleaved pairs per step."""
    from infertune.core.config import config_from
    from infertune.core.workload import load_run
    from infertune.estimate.memory import resolve_dtype
    from infertune.measure.quality import Tolerance
    from infertune.models import store
    from infertune.probe.model import profile_model
    from infertune.techniques import Setup
    from infertune.tuning.loop import precheck

    max_trials = 8 if max_trials is None else max_trials  # None: not given (the CLI's way of saying so)
    objective = objective or "latency"
    trial_timeout = 900.0 if trial_timeout is None else trial_timeout
    validate.check(
        max_new_tokens=max_new_tokens,
        batch=batch,
        repeats=repeats,
        warmup=warmup,
        seed=seed,
        concurrency=concurrency,
        max_trials=max_trials,
        time_budget=time_budget,
        max_ttft=max_ttft,
        max_tpot=max_tpot,
        min_quality=min_quality,
        max_nll_delta=max_nll_delta,
        max_kl=max_kl,
        trial_timeout=trial_timeout,
    )
    validate.choice("objective", objective, ("memory", "latency", "throughput"))
    limits = {
        "max_memory_bytes": parse_size_flag(max_memory, "--max-memory"),
        "trial_memory_limit_bytes": parse_size_flag(trial_memory_limit, "--trial-memory-limit"),
    }
    min_pairs = 3 if min_pairs is None else min_pairs
    max_pairs = max(5, min_pairs) if max_pairs is None else max_pairs
    if not 2 <= min_pairs <= max_pairs:
        raise UserError("min_pairs and max_pairs: 2 <= min_pairs <= max_pairs (interleaved pairs per step)")
    wl, cfg_data = load_run(
        workload,
        model=model,
        revision=revision,
        max_new_tokens=max_new_tokens,
        **input_lengths(input_len),
        batch=batch,
        repeats=repeats,
        warmup=warmup,
        seed=seed,
        concurrency=concurrency,
    )
    if wl.do_sample:
        raise UserError("tune compares greedy outputs against the baseline: set do_sample: false")
    cfg = config_from(
        cfg_data, "config", dtype=dtype, attn_implementation=attn, cache_implementation=kv_cache, batching=batching
    )
    path = store.resolve(wl.model, wl.revision, say=say, weights=True, checksums=True)
    prof = profile_model(path, trust_remote_code)
    start = Setup(
        dtype=resolve_dtype(cfg.dtype, prof.native_dtype) or "float32",
        attn=cfg.attn_implementation or "sdpa",
        batching=cfg.batching,
        max_batch_tokens=cfg.max_batch_tokens,
        cb_block_size=cfg.cb_block_size,
        cb_num_blocks=cfg.cb_num_blocks,
        kv_cache=cfg.cache_implementation
        if cfg.cache_implementation in ("static", "quantized", "offloaded")
        else "dynamic",
    )
    given = {"min_exact_match": min_quality, "max_nll_increase": max_nll_delta, "max_kl": max_kl}
    spec = TuneSpec(
        model=wl.model,
        model_path=str(path),
        workload=wl,
        start=start,
        objective=objective,
        constraints=Constraints(max_memory_bytes=limits["max_memory_bytes"], max_ttft_s=max_ttft, max_tpot_s=max_tpot),
        tolerance=Tolerance(**{k: v for k, v in given.items() if v is not None}),
        max_trials=max_trials,
        time_budget_s=time_budget,
        trial_timeout_s=trial_timeout,
        trial_memory_limit_bytes=limits["trial_memory_limit_bytes"],
        min_pairs=min_pairs,
        max_pairs=max_pairs,
        serve=wl.concurrency > 1 if serve is None else serve,
    )
    facts = host_facts(spec, prof)
    precheck(spec, facts)
    return spec, facts


def resume_only(resume: str | Path, **given: Any) -> None:
    """`resume` continues a run exactly as its spec.json describes it: a flag that would change the run is
    refused (one line naming it), never silently ignored."""
    changed = [k for k, v in given.items() if v is not None]
    if changed:
        names = ", ".join("the workload file" if k == "workload" else flag(k) for k in changed)
        raise UserError(
            f"--resume {resume} continues that run as it was specified; {names} would change it: resume "
            "without it, or start a new run with --output NEW_FOLDER"
        )


def run_tune(run: Run, facts: Facts, on_event: OnEvent | None = None, executor: TrialFn | None = None) -> TuneOutcome:
    """The loop, then the serve stage when asked for, then the report, for an existing run directory."""
    from infertune import report
    from infertune.tuning.loop import tune as loop
    from infertune.tuning.run import best_step
    from infertune.tuning.serve_stage import serve_stage

    spec = run.spec()
    steps = loop(run, facts, on_event, executor)
    served = serve_stage(run, facts, best, on_event) if spec.serve and (best := best_step(steps)) is not None else []
    r = report.write(run.path, spec, steps, facts, run.warnings, served)
    return TuneOutcome(
        run_dir=str(run.path),
        steps=steps,
        served=served,
        warnings=run.warnings,
        report=r,
        model_revision=revision_of(spec.model_path),
    )


def tune(
    workload: str | Path | None = None,
    *,
    output: str | Path | None = None,
    resume: str | Path | None = None,
    on_event: OnEvent | None = None,
    say: Say = quiet,
    trust_remote_code: bool = False,
    cluster: str | None = None,
    **options: Any,
) -> TuneOutcome:
    """Baseline, then one change at a time, measured and quality-gated, until nothing improves or the budget is spent;
    durable in the run directory (`resume` continues one). `options`: `tune_spec`'s; `cluster`: ray or ray=ADDRESS."""
    from infertune.probe.model import profile_model

    check_output(output, "dir")
    check_output(resume, "run", "resume")
    cluster = check_cluster(cluster, None if resume is not None else workload)  # ray[=ADDRESS]: trials on Ray
    if resume is not None:
        resume_only(resume, workload=workload, output=output, **options)
        spec = (run := Run(Path(resume))).spec()
        facts = host_facts(spec, profile_model(spec.model_path, trust_remote_code))
    else:
        spec, facts = tune_spec(workload, trust_remote_code=trust_remote_code, say=say, **options)
        run = Run.create(Path(output) if output else default_run_dir("tune"), spec)
    say(f"run directory: {run.path}")
    (on_event or (lambda e: None))({"event": "run", "path": str(run.path)})
    return run_tune(run, facts, on_event, executor_for(cluster))


def report(run_dir: str | Path, rebuild: bool = False) -> dict[str, Any]:
    """A run's report.json; written first from its finished trials when it has none yet (an interrupted
    run) or when `rebuild`."""
    import json

    check_output(run_dir, "run", "report")
    path = Path(run_dir) / "report.json"
    if rebuild or (not path.exists() and (Path(run_dir) / "results.jsonl").exists()):
        from infertune import report as reporting
        from infertune.probe.model import profile_model

        run = Run(Path(run_dir))
        spec = run.spec()
        steps = run.steps()
        if not steps:
            raise UserError(f"{run_dir}: no finished trial to report on yet")
        facts = host_facts(spec, profile_model(spec.model_path))
        return reporting.write(run.path, spec, steps, facts, run.warnings, run.serve_steps())
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{run_dir}: no report.json (not a finished tune run directory)") from None
    except ValueError:
        raise UserError(f"{path} is not valid JSON") from None
