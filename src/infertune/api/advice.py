"""The advise verb: where the workload hurts and one compatible change to try next.

Apart from `estimate` (`infertune.api.plan`) because its return type is the advisor's `Advice`: the MCP
server reads the annotations (`typing.get_type_hints`), so the advisor is imported with this module, and
`estimate` stays clear of it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from infertune.advisor.advise import Advice
from infertune.api.common import Say, input_lengths, parse_tokens, quiet
from infertune.core import validate
from infertune.core.errors import UserError
from infertune.models.hub import revision_of

if TYPE_CHECKING:
    from infertune.measure.results import TrialResult
    from infertune.techniques.base import EngineEvidence


def advise(
    workload: str | Path | None = None,
    model: str | None = None,
    revision: str | None = None,
    gpu: str | None = None,
    gpus: int = 1,
    vram: str | None = None,
    cpu_ram: str | None = None,
    dtype: str | None = None,
    attn: str | None = None,
    quantization: str | None = None,
    kv_cache: str | None = None,
    compile: bool = False,
    batching: str | None = None,
    input_len: str | int | None = None,
    max_new_tokens: str | int | None = None,
    batch: int | None = None,
    concurrency: int | None = None,
    measured: str | Path | None = None,
    trust_remote_code: bool = False,
    ask: Callable[[str, int], int] | None = None,
    say: Say = quiet,
    device_map: str | None = None,
    tp: int = 1,
    lib: list[str] | dict[str, str] | None = None,
    observed: list[str] | dict[str, str | float] | None = None,
    oom: str | None = None,
    cpu: str | None = None,
    cpu_flags: str | None = None,
    cores: int | None = None,
) -> Advice:
    """Diagnose where the workload hurts and propose one compatible change: an `Advice`. Missing details
    are assumed and listed (or asked through `ask(question, default)` when given). `device_map` and `tp`
    describe the current placement; `lib` the target's library versions (NAME=VERSION). `observed`: what the
    user saw on the current setup (KEY=VALUE items or a mapping; keys tpot, ttft, e2e, tokens_per_s, peak;
    e.g. tpot=220ms, peak=23GiB) and `oom` the phase that ran out of memory (load, prefill, decode, host-ram).
    `cpu`: a CPU target by name (Xeon Platinum 8480+, EPYC 9654, Graviton3, ...), `cpu_flags` its ISA flags
    (avx512_bf16,amx_bf16,...), `cores` its cores; `cpu_ram` is then its memory. Nothing stated: this host."""
    from infertune.advisor import intake
    from infertune.advisor.advise import advise as run_advise
    from infertune.core.config import check_attn, config_from
    from infertune.core.workload import load_run, read_observed
    from infertune.models import store
    from infertune.probe.model import profile_model

    validate.check(batch=batch, concurrency=concurrency, gpus=gpus)
    check_attn(attn)
    intake.check_current(dtype, quantization, kv_cache, batching, tp)
    # names and sizes first: nothing is read or probed for an input that will be refused
    intake.check_target(gpu, cpu, cpu_flags, cores, cpu_ram)
    if vram:
        intake.parse_size(vram, "--vram")
    seen = intake.observed_from(observed, oom)
    # the run file is validated exactly as measure validates it: the workload and its config: section
    wl, cfg_data = load_run(
        workload,
        model=model,
        revision=revision,
        **input_lengths(input_len),
        max_new_tokens=parse_tokens(max_new_tokens, "max_new_tokens")[0] if max_new_tokens else None,
        batch=batch,
        concurrency=concurrency,
    )
    cfg = config_from(cfg_data, "config")
    from_file = read_observed(workload)
    if from_file:  # the run file's observed: section, the flags' keys on top
        merged = intake.observed_from(from_file, None)
        if merged is not None and seen is not None:
            merged = merged.model_copy(update=seen.model_dump(exclude_unset=True, exclude={"kind"}))
        seen = merged or seen
    given = wl.model_fields_set
    n_in = wl.longest_input if given & {"input_len", "input_lens"} else None
    n_out = wl.max_new_tokens if "max_new_tokens" in given else None
    conc = wl.concurrency if "concurrency" in given else None
    model = wl.model if "model" in given else store.DEFAULT_MODEL
    trial, engines = _read_measured(measured, model) if measured is not None else (None, [])  # before any work
    # the run file's config: describes the current setup where no flag does
    dtype = dtype or (cfg.dtype if "dtype" in cfg.model_fields_set else None)
    attn = attn or cfg.attn_implementation
    kv_cache = kv_cache or cfg.cache_implementation
    batching = batching or (cfg.batching if "batching" in cfg.model_fields_set else None)
    if device_map is None and isinstance(cfg.device_map, str):
        device_map = cfg.device_map
    tp = tp if tp != 1 else cfg.tp_size
    libs = lib if isinstance(lib, dict) else intake.parse_libs(lib)
    path = store.resolve(model, wl.revision, say=say)
    prof = profile_model(path, trust_remote_code)
    intake.placement(prof, gpus, device_map, tp)  # a placement that cannot be is refused before any probe
    say("reading the hardware")
    acc, here = intake.target_hardware(gpu, vram, cpu, cpu_flags, cores, cpu_ram)
    shown = store.command_name(model, path)  # how snippets and commands name it
    i = intake.build(
        prof,
        shown,
        acc,
        here,
        gpus=gpus,
        cpu_ram=cpu_ram,
        input_len=n_in,
        max_new_tokens=n_out,
        batch=wl.batch,
        concurrency=conc,
        dtype=dtype,
        attn=attn,
        quantization=quantization,
        kv_cache=kv_cache,
        compile=compile,
        batching=batching,
        gpu_given=gpu is not None,
        ask=ask,
        device_map=device_map,
        tp=tp,
        libs=libs,
        max_memory=cfg.max_memory,
        observed=seen,
        load_kwargs=cfg.load_kwargs,
    )
    i.facts.engines_measured = engines
    assumptions = i.assumptions + [f"serving engine {e.line()}" for e in engines]
    advice = run_advise(i.facts, i.current, assumptions, i.questions, trial)
    return advice.model_copy(update={"model_revision": revision_of(path)})


def _same_model(a: str, b: str) -> bool:
    from infertune.models import store

    a, b = store.ALIASES.get(a, a), store.ALIASES.get(b, b)
    return a == b or (
        Path(a).expanduser().is_dir() and Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
    )


def _read_measured(measured: str | Path, model: str) -> tuple[TrialResult | None, list[EngineEvidence]]:
    """`--measured`: a measure result (a trial of the current setup), or a tune run (its directory or report.json)
    whose serve stage measured serving engines against transformers serve on this workload."""
    import json

    from infertune.measure.results import TrialResult
    from infertune.techniques.base import EngineEvidence

    path = Path(measured)
    if path.is_dir():
        path = path / "report.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"--measured: no such file {path}") from None
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("kind") == "tune-report":
        if not _same_model(str(data.get("model")), model):
            raise UserError(f"--measured: {measured} measured {data.get('model')}, not {model}")
        return None, [
            EngineEvidence.model_validate({**e, "source": str(measured)}) for e in data.get("serving_engine") or []
        ]
    try:
        return TrialResult.model_validate(data), []
    except ValueError:
        raise UserError(
            f"--measured: {measured} is not a measure result (infertune measure --output FILE) nor "
            "a tune run (its directory or report.json)"
        ) from None
