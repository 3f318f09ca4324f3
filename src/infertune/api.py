"""infertune's verbs as Python functions: the CLI, the MCP server and user code all call these.

Arguments are the CLI's long flags in snake_case (token counts also as text: "1k"); each function returns
the pydantic model whose JSON is what `--format json` prints. Bad input raises `UserError` with one line.
Long verbs take `on_event`, called with progress dicts (`{"event": "phase" | "progress" | "trial" | ...}`).
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from infertune.advise import Advice
from infertune.errors import UserError
from infertune.estimate import Estimate
from infertune.probe.hardware import Hardware
from infertune.schema import SCHEMA_VERSION
from infertune.tune import ServeStep, Step

Say = Callable[[str], None]
OnEvent = Callable[[dict[str, Any]], None]


def _quiet(_msg: str) -> None:
    pass


# --- shared parsing -----------------------------------------------------------------------------------


def parse_tokens(text: str | int) -> list[int]:
    """'512', '1k', '8k,32k', '1m' -> token counts (k = 1024, as context lengths are quoted)."""
    if isinstance(text, int):
        return [text]
    values = []
    for part in text.split(","):
        part = part.strip().lower()
        mult = {"k": 1024, "m": 1024 * 1024}.get(part[-1:], 1)
        digits = part[:-1] if mult > 1 else part
        try:
            value = int(float(digits) * mult)
        except ValueError:
            raise UserError(f"not a token count: {part!r} (use e.g. 512, 4k, 128k)") from None
        if value <= 0:
            raise UserError(f"token counts must be positive: {part!r}")
        values.append(value)
    return values


def input_lengths(value: str | int | list[int] | None) -> dict[str, Any]:
    """input_len: one length for every prompt, or a list of mixed lengths (workload `input_lens`)."""
    if value is None:
        return {}
    if isinstance(value, list):
        return {"input_lens": value}
    lengths = parse_tokens(value)
    return {"input_len": lengths[0]} if len(lengths) == 1 and "," not in str(value) else {"input_lens": lengths}


def parse_budgets(text: str) -> dict[str, str]:
    """--max-memory '0=20GiB,cpu=64GiB' -> from_pretrained's max_memory ({'0': '20GiB', 'cpu': '64GiB'})."""
    from infertune.estimate.placement import parse_max_memory

    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, size = (x.strip() for x in part.partition("="))
        if not sep or not size:
            raise UserError(f"--max-memory: {part!r} is not DEVICE=SIZE (e.g. 0=20GiB,cpu=64GiB)")
        (device, n), = parse_max_memory({key: size}).items()  # the estimator's reading: a known device, a size
        if n <= 0:
            raise UserError("--max-memory: the size must be positive")
        out[device.removeprefix("cuda:")] = size
    if not out:
        raise UserError("--max-memory: give DEVICE=SIZE pairs, e.g. 0=20GiB,cpu=64GiB")
    return out


def parse_size_flag(text: str | int | None, flag: str) -> int | None:
    if text is None or isinstance(text, int):
        return text
    from infertune.intake import parse_size

    return int(text) if text.strip().isdigit() else parse_size(text, flag)


# --- env --------------------------------------------------------------------------------------------------


class EnvReport(BaseModel):
    kind: Literal["env"] = "env"
    schema_version: str = SCHEMA_VERSION
    hardware: Hardware
    libraries: dict[str, str | None]
    python: str


def env() -> EnvReport:
    """This machine's hardware and the versions of the libraries that decide what can run."""
    from infertune.probe.hardware import detect_hardware
    from infertune.probe.versions import library_versions

    return EnvReport(hardware=detect_hardware(), libraries=library_versions(), python=sys.version.split()[0])


# --- estimate ---------------------------------------------------------------------------------------------


class EstimateSweep(BaseModel):
    kind: Literal["estimate"] = "estimate"
    schema_version: str = SCHEMA_VERSION
    sweep: list[Estimate]  # one per input length


def estimate(model: str | None = None, revision: str | None = None, dtype: str = "auto",
             quantization: str | None = None, kv_cache: str = "dynamic", kv_nbits: int = 4,
             kv_residual_len: int = 128, max_cache_len: str | int | None = None, attn: str = "sdpa",
             prefill_chunk: str | int | None = None, input_len: str | int = "512", max_new_tokens: str | int = "256",
             batch: int = 1, concurrency: int = 1, gpu: str | None = None, gpus: int = 1,
             max_memory: str | None = None, cpu: bool = False, trust_remote_code: bool = False,
             say: Say = _quiet) -> Estimate | EstimateSweep:
    """Memory by component, roofline speed and what fits, from config.json alone: an `Estimate`, or an
    `EstimateSweep` when `input_len` lists several lengths ("1k,8k,32k")."""
    from infertune import models
    from infertune.estimate import estimate as run_estimate
    from infertune.estimate.accelerators import find_accelerator, from_detected_gpu, probe_cpu
    from infertune.estimate.memory import EstimateSettings, Quantization, resolve_dtype
    from infertune.estimate.placement import parse_max_memory
    from infertune.probe.model import profile_model

    if batch < 1 or concurrency < 1 or gpus < 1:
        raise UserError("batch, concurrency and gpus are at least 1")
    lengths = parse_tokens(input_len)
    new_tokens = parse_tokens(max_new_tokens)[0]
    budgets = parse_max_memory(max_memory)
    if budgets:  # the GPUs the budgets name (a CPU-only budget: no GPU at all)
        gpus = max([gpus, *(int(d[5:]) + 1 for d in budgets if d.startswith("cuda:"))])
    path = models.resolve(model or models.DEFAULT_MODEL, revision, say=say)
    prof = profile_model(path, trust_remote_code)
    resolved = resolve_dtype(dtype, prof.native_dtype)
    if resolved is None:
        raise UserError(f"--dtype: unknown dtype {dtype!r}; use auto, float32, bfloat16, float16 or fp8")
    if kv_cache not in ("dynamic", "static", "quantized", "offloaded"):
        raise UserError(f"--kv-cache: unknown {kv_cache!r}; use dynamic, static, quantized or offloaded")
    acc = None
    if gpu:
        acc = find_accelerator(gpu)
    elif not cpu:
        from infertune.probe.hardware import detect_gpus

        found = detect_gpus()
        acc = from_detected_gpu(found[0].name, found[0].total_memory_bytes) if found else None
    if acc is None:
        say("probing this CPU's bandwidth and FLOP/s")
        acc = probe_cpu()
    platform = "cpu" if acc.vendor == "host" else ("mps" if acc.vendor == "Apple" else "cuda")
    if budgets and platform == "mps":
        raise UserError("--max-memory: Apple's unified memory is one device; give --gpu NAME for a CUDA card")
    if budgets and platform == "cpu" and any(d.startswith("cuda:") for d in budgets):
        raise UserError("--max-memory names GPUs but none is detected here; give --gpu NAME to estimate for one")
    base = EstimateSettings(
        dtype=resolved, quantization=Quantization.parse(quantization), kv_cache=kv_cache, kv_nbits=kv_nbits,
        kv_residual_len=kv_residual_len, max_cache_len=parse_tokens(max_cache_len)[0] if max_cache_len else None,
        attn=attn, prefill_chunk=parse_tokens(prefill_chunk)[0] if prefill_chunk else None,
        max_new_tokens=new_tokens, batch=batch, concurrency=concurrency, platform=platform,
    )
    results = [run_estimate(prof, base.model_copy(update={"input_len": n}), acc, model=str(path), gpus=gpus,
                            max_memory=budgets) for n in lengths]
    return results[0] if len(results) == 1 else EstimateSweep(sweep=results)


# --- advise -----------------------------------------------------------------------------------------------


def advise(workload: str | Path | None = None, model: str | None = None, revision: str | None = None,
           gpu: str | None = None, gpus: int = 1, vram: str | None = None, cpu_ram: str | None = None,
           dtype: str | None = None, attn: str | None = None, quantization: str | None = None,
           kv_cache: str | None = None, compile: bool = False, batching: str | None = None,
           input_len: str | int | None = None, max_new_tokens: str | int | None = None, batch: int | None = None,
           concurrency: int | None = None, measured: str | Path | None = None, trust_remote_code: bool = False,
           ask: Callable[[str, int], int] | None = None, say: Say = _quiet) -> Advice:
    """Diagnose where the workload hurts and propose one compatible change: an `Advice`. Missing details
    are assumed and listed (or asked through `ask(question, default)` when given)."""
    from infertune import intake, models
    from infertune.advise import advise as run_advise
    from infertune.probe.model import profile_model
    from infertune.workload import read_run_file

    data: dict = read_run_file(workload)[0] if workload else {}
    model = model or data.get("model") or models.DEFAULT_MODEL
    n_in = parse_tokens(input_len)[0] if input_len else data.get("input_len")
    n_out = parse_tokens(max_new_tokens)[0] if max_new_tokens else data.get("max_new_tokens")
    conc = concurrency or data.get("concurrency")
    path = models.resolve(model, revision or data.get("revision"), say=say)
    prof = profile_model(path, trust_remote_code)
    say("reading the hardware")
    acc, here = intake.target_hardware(gpu, vram)
    shown = models.command_name(model, path)  # how snippets and commands name it
    i = intake.build(prof, shown, acc, here, gpus=gpus, cpu_ram=cpu_ram, input_len=n_in, max_new_tokens=n_out,
                     batch=batch or data.get("batch") or 1, concurrency=conc, dtype=dtype, attn=attn,
                     quantization=quantization, kv_cache=kv_cache, compile=compile, batching=batching,
                     gpu_given=gpu is not None, ask=ask)
    trial = None
    if measured is not None:
        from infertune.measure.results import TrialResult

        try:
            trial = TrialResult.model_validate_json(Path(measured).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"--measured: no such file {measured}") from None
        except ValueError:
            raise UserError(f"--measured: {measured} is not a measure result (infertune measure --output FILE)") from None
    return run_advise(i.facts, i.current, i.assumptions, i.questions, trial)


# --- measure ----------------------------------------------------------------------------------------------


def measure(workload: str | Path | None = None, model: str | None = None, revision: str | None = None,
            max_new_tokens: int | None = None, input_len: str | int | list[int] | None = None,
            batch: int | None = None, repeats: int | None = None, warmup: int | None = None, seed: int | None = None,
            dtype: str | None = None, attn: str | None = None, kv_cache: str | None = None, device: str | None = None,
            concurrency: int | None = None, batching: str | None = None, max_batch_tokens: int | None = None,
            cb_block_size: int | None = None, cb_num_blocks: int | None = None, trust_remote_code: bool = False,
            timeout: float = 900.0, memory_limit: str | int | None = None, tp: int = 1,
            device_map: str | None = None, max_memory: str | dict[str, str] | None = None,
            tp_plan: str = "auto", on_event: OnEvent | None = None, say: Say = _quiet):
    """One configuration on one workload, in an isolated child process: a `Measurement` (the trial's
    result, measured, with the estimate for the same shape beside it). A failed trial is a result too."""
    from infertune import models
    from infertune.config import config_from
    from infertune.measure import run_trial
    from infertune.predicted import Measurement, compare
    from infertune.workload import load_run

    wl, cfg_data = load_run(
        workload, model=model, revision=revision, max_new_tokens=max_new_tokens, **input_lengths(input_len),
        batch=batch, repeats=repeats, warmup=warmup, seed=seed, concurrency=concurrency,
    )
    if isinstance(max_memory, str):
        max_memory = parse_budgets(max_memory)
    cfg = config_from(
        cfg_data, "config", dtype=dtype, attn_implementation=attn, cache_implementation=kv_cache, device=device,
        trust_remote_code=trust_remote_code or None, batching=batching, max_batch_tokens=max_batch_tokens,
        cb_block_size=cb_block_size, cb_num_blocks=cb_num_blocks, tp_size=tp if tp != 1 else None,
        device_map=device_map, max_memory=max_memory,
    )
    if timeout <= 0:
        raise UserError("--timeout must be positive")
    if tp_plan not in ("auto", "mlp"):
        raise UserError(f"--tp-plan: unknown {tp_plan!r}; use auto or mlp")
    if tp_plan != "auto" and cfg.tp_size == 1:
        raise UserError("--tp-plan applies to tensor parallelism: give --tp N too")
    if tp_plan == "mlp":  # the flag over the run file's plan
        cfg = cfg.model_copy(update={"tp_plan": "mlp"})
    path = models.resolve(wl.model, wl.revision, say=say)
    if cfg.tp_size > 1:  # refuse before launching ranks that cannot split the model
        from infertune.probe.model import mlp_only_tp_plan, profile_model
        from infertune.techniques.parallel import tp_problems

        plan = "auto" if cfg.tp_plan == "auto" else "mlp"  # a dict of overrides: checked as the MLP-only plan
        problems = tp_problems(profile_model(path, cfg.trust_remote_code), cfg.tp_size, plan)
        if problems:
            raise UserError(f"--tp {cfg.tp_size}: " + "; ".join(problems))
        if cfg.tp_plan == "mlp":  # the rules for this model's own plan keys, in the result
            cfg = cfg.model_copy(update={"tp_plan": mlp_only_tp_plan(str(path), cfg.trust_remote_code)})
    result = run_trial(cfg, wl, path, timeout_s=timeout, on_event=on_event,
                       memory_limit_bytes=parse_size_flag(memory_limit, "--memory-limit"))
    (on_event or (lambda e: None))({"event": "phase", "phase": "estimate"})
    try:  # the estimate beside the measurement; a failure here never costs the measurement
        comparison = compare(result)
    except Exception as e:  # noqa: BLE001
        say(f"no estimate for this trial: {type(e).__name__}: {e}")
        comparison = None
    return Measurement(**result.model_dump(), estimate=comparison)


# --- tune -------------------------------------------------------------------------------------------------


class TuneOutcome(BaseModel):
    kind: Literal["tune"] = "tune"
    schema_version: str = SCHEMA_VERSION
    run_dir: str
    steps: list[Step]  # measured, one per trial
    served: list[ServeStep] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    report: dict[str, Any]  # report.json: the accepted configuration, its code and serve command


def host_facts(spec, profile):
    """Facts for the machine the trials run on (this one), with the workload's shape."""
    from infertune import intake

    acc, _ = intake.target_hardware(None, None)
    wl = spec.workload
    i = intake.build(profile, spec.model_path, acc, True, input_len=wl.longest_input or 64,
                     max_new_tokens=wl.max_new_tokens, batch=wl.batch, concurrency=wl.concurrency,
                     batching=spec.start.batching)
    return i.facts


def tune_spec(workload: str | Path | None = None, model: str | None = None, revision: str | None = None,
              max_new_tokens: int | None = None, input_len: str | int | list[int] | None = None,
              batch: int | None = None, repeats: int | None = None, warmup: int | None = None,
              seed: int | None = None, dtype: str | None = None, attn: str | None = None, kv_cache: str | None = None,
              concurrency: int | None = None, batching: str | None = None, max_trials: int = 8,
              time_budget: float | None = None, objective: str = "latency", max_memory: str | int | None = None,
              max_ttft: float | None = None, max_tpot: float | None = None, min_quality: float | None = None,
              max_nll_delta: float | None = None, max_kl: float | None = None, trial_timeout: float = 900.0,
              serve: bool | None = None, trust_remote_code: bool = False, trial_memory_limit: str | int | None = None,
              say: Say = _quiet):
    """The validated TuneSpec and host Facts for a new run (refused before any trial when impossible)."""
    from infertune import models
    from infertune.config import config_from
    from infertune.estimate.memory import resolve_dtype
    from infertune.measure.quality import Tolerance
    from infertune.probe.model import profile_model
    from infertune.techniques import Setup
    from infertune.tune import Constraints, TuneSpec, precheck
    from infertune.workload import load_run

    if objective not in ("memory", "latency", "throughput"):
        raise UserError(f"--objective: unknown {objective!r}; use memory, latency or throughput")
    if min_quality is not None and not 0 <= min_quality <= 1:
        raise UserError("--min-quality is a share of prompts between 0 and 1")
    if max_trials < 1:
        raise UserError("--max-trials is at least 1 (the baseline)")
    wl, cfg_data = load_run(workload, model=model, revision=revision, max_new_tokens=max_new_tokens,
                            **input_lengths(input_len), batch=batch, repeats=repeats, warmup=warmup, seed=seed,
                            concurrency=concurrency)
    if wl.do_sample:
        raise UserError("tune compares greedy outputs against the baseline: set do_sample: false")
    cfg = config_from(cfg_data, "config", dtype=dtype, attn_implementation=attn, cache_implementation=kv_cache,
                      batching=batching)
    path = models.resolve(wl.model, wl.revision, say=say)
    prof = profile_model(path, trust_remote_code)
    start = Setup(dtype=resolve_dtype(cfg.dtype, prof.native_dtype) or "float32", attn=cfg.attn_implementation or "sdpa",
                  batching=cfg.batching, max_batch_tokens=cfg.max_batch_tokens, cb_block_size=cfg.cb_block_size,
                  cb_num_blocks=cfg.cb_num_blocks,
                  kv_cache=cfg.cache_implementation if cfg.cache_implementation in ("static", "quantized", "offloaded")
                  else "dynamic")
    given = {"min_exact_match": min_quality, "max_nll_increase": max_nll_delta, "max_kl": max_kl}
    spec = TuneSpec(model=wl.model, model_path=str(path), workload=wl, start=start, objective=objective,
                    constraints=Constraints(max_memory_bytes=parse_size_flag(max_memory, "--max-memory"),
                                            max_ttft_s=max_ttft, max_tpot_s=max_tpot),
                    tolerance=Tolerance(**{k: v for k, v in given.items() if v is not None}), max_trials=max_trials,
                    time_budget_s=time_budget, trial_timeout_s=trial_timeout,
                    trial_memory_limit_bytes=parse_size_flag(trial_memory_limit, "--trial-memory-limit"),
                    serve=wl.concurrency > 1 if serve is None else serve)
    facts = host_facts(spec, prof)
    precheck(spec, facts)
    return spec, facts


def run_tune(run, facts, on_event: OnEvent | None = None) -> TuneOutcome:
    """The loop, then the serve stage when asked for, then the report, for an existing run directory."""
    from infertune import report
    from infertune.tune import best_step, serve_stage
    from infertune.tune import tune as loop

    spec = run.spec()
    steps = loop(run, facts, on_event)
    best = best_step(steps)
    served = serve_stage(run, facts, best, on_event) if spec.serve and best is not None else []
    r = report.write(run.path, spec, steps, facts, run.warnings, served)
    return TuneOutcome(run_dir=str(run.path), steps=steps, served=served, warnings=run.warnings, report=r)


def tune(workload: str | Path | None = None, *, output: str | Path | None = None, resume: str | Path | None = None,
         on_event: OnEvent | None = None, say: Say = _quiet, trust_remote_code: bool = False,
         **options: Any) -> TuneOutcome:
    """Baseline, then one change at a time, measured and quality-gated, until nothing improves or the
    budget is spent; results durable in the run directory (`resume` continues one). `options`: the
    arguments of `tune_spec` (model, max_new_tokens, objective, max_trials, max_memory, ...)."""
    from infertune.probe.model import profile_model
    from infertune.tune import Run

    if resume is not None:
        run = Run(Path(resume))
        spec = run.spec()
        facts = host_facts(spec, profile_model(spec.model_path, trust_remote_code))
    else:
        spec, facts = tune_spec(workload, trust_remote_code=trust_remote_code, say=say, **options)
        run = Run.create(Path(output) if output else default_run_dir("tune"), spec)
    say(f"run directory: {run.path}")
    (on_event or (lambda e: None))({"event": "run", "path": str(run.path)})
    return run_tune(run, facts, on_event)


def default_run_dir(prefix: str) -> Path:
    return Path("infertune-runs") / datetime.datetime.now().strftime(f"{prefix}-%Y%m%d-%H%M%S")


def report(run_dir: str | Path, rebuild: bool = False) -> dict[str, Any]:
    """A run's report.json; written first from its finished trials when it has none yet (an interrupted
    run) or when `rebuild`."""
    import json

    path = Path(run_dir) / "report.json"
    if rebuild or (not path.exists() and (Path(run_dir) / "results.jsonl").exists()):
        from infertune import report as reporting
        from infertune.probe.model import profile_model
        from infertune.tune import Run

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


# --- doctor -----------------------------------------------------------------------------------------------


def doctor(paths: list[str | Path] | str | Path | None = None, env: bool = False, advise: bool = False,
           gpu: str | None = None, model: str | None = None, say: Say = _quiet):
    """The classic inference mistakes in scripts (never executed), optionally the environment's, and each
    script's settings as an advise run: a `DoctorResult`."""
    from infertune import doctor as doc
    from infertune.doctor.rules import Target

    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [Path(p) for p in paths or []]
    if not paths and not env:
        raise UserError("give Python files or folders to check (infertune doctor app.py), or --env")
    from infertune.probe.versions import library_versions

    tv = library_versions(("transformers",))["transformers"]
    target = Target(transformers_major=int(tv.split(".")[0]) if tv and tv.split(".")[0].isdigit() else None)
    if gpu:
        from infertune.estimate.accelerators import find_accelerator

        acc = find_accelerator(gpu)
        target.gpu_name, target.gpu_memory_bytes = acc.name, acc.memory_bytes
        target.compute_capability = float(acc.compute_capability) if acc.compute_capability else None
    result = doc.check(paths, target)
    if env:
        result.findings += _environment_findings(model, say)
    if advise:
        result.advice = _advise_scripts(paths, gpu)
    return result


def _environment_findings(model: str | None, say: Say):
    from infertune.doctor.env import check_environment
    from infertune.probe.hardware import detect_hardware

    say("reading the environment")
    hw = detect_hardware()
    weights = None
    if model:
        from infertune import models
        from infertune.estimate.memory import EstimateSettings, estimate_memory, resolve_dtype
        from infertune.probe.model import profile_model

        prof = profile_model(models.resolve(model, None, say=say))
        dtype = resolve_dtype("auto", prof.native_dtype) or "float32"
        weights = estimate_memory(prof, EstimateSettings(dtype=dtype, platform="cuda" if hw.gpus else "cpu")).weights_bytes
    return check_environment(hw, model_bytes=weights, model=model)


def _advise_scripts(paths: list[Path], gpu: str | None):
    """Each script's literal settings (model, dtype, attention, quantization, cache, max_new_tokens) as an
    advise run, or why there is none (no model literal, the model is not available here)."""
    import shlex

    from infertune import doctor as doc

    out = []
    for f in doc.python_files(paths)[0]:
        try:
            found = doc.settings(doc.parse(f))
        except ValueError:
            continue
        if "model" not in found:
            out.append(doc.ScriptAdvice(path=str(f), error="no from_pretrained('<model>') literal to advise on"))
            continue
        if gpu:
            found["gpu"] = gpu
        flags = [f"--{k.replace('_', '-')}" + ("" if v is True else f" {shlex.quote(str(v))}") for k, v in found.items()]
        row = doc.ScriptAdvice(path=str(f), command=f"infertune advise --no-input {' '.join(flags)}")
        try:
            row.advice = advise(**found)
        except UserError as e:
            row.error = f"cannot advise: {e}"
        out.append(row)
    return out
