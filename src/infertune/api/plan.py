"""The verbs that answer without running the model: env and estimate (advise: `infertune.api.advice`)."""

from __future__ import annotations

import sys
from typing import Literal

from pydantic import BaseModel, Field

from infertune.api.common import Say, parse_tokens, quiet
from infertune.core import validate
from infertune.core.errors import UserError
from infertune.core.schema import SCHEMA_VERSION
from infertune.estimate import Estimate
from infertune.models.hub import REVISION_DOC, revision_of
from infertune.probe.hardware import Hardware

KV_NBITS = (2, 4)  # transformers' quantized cache with the quanto backend (the one trials run)


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
    model_revision: str | None = Field(None, description=REVISION_DOC)
    sweep: list[Estimate]  # one per input length


def estimate(
    model: str | None = None,
    revision: str | None = None,
    dtype: str = "auto",
    quantization: str | None = None,
    kv_cache: str = "dynamic",
    kv_nbits: int = 4,
    kv_residual_len: int = 128,
    max_cache_len: str | int | None = None,
    attn: str = "sdpa",
    prefill_chunk: str | int | None = None,
    input_len: str | int = "512",
    max_new_tokens: str | int = "256",
    batch: int = 1,
    concurrency: int = 1,
    gpu: str | None = None,
    gpus: int = 1,
    max_memory: str | None = None,
    cpu: bool = False,
    trust_remote_code: bool = False,
    say: Say = quiet,
) -> Estimate | EstimateSweep:
    """Memory by component, roofline speed and what fits, from config.json alone: an `Estimate`, or an
    `EstimateSweep` when `input_len` lists several lengths ("1k,8k,32k")."""
    from infertune.core.config import DTYPE_ALIASES, check_attn
    from infertune.estimate import estimate as run_estimate
    from infertune.estimate.accelerators import find_accelerator, from_detected_gpu, probe_cpu
    from infertune.estimate.memory import EstimateSettings, Quantization, resolve_dtype
    from infertune.estimate.placement import parse_max_memory
    from infertune.models import store
    from infertune.probe.model import profile_model

    validate.check(batch=batch, concurrency=concurrency, gpus=gpus, kv_residual_len=kv_residual_len)
    lengths = parse_tokens(input_len)
    new_tokens = parse_tokens(max_new_tokens, "max_new_tokens")[0]
    cache_len = parse_tokens(max_cache_len, "max_cache_len")[0] if max_cache_len else None
    chunk = parse_tokens(prefill_chunk, "prefill_chunk")[0] if prefill_chunk else None
    validate.choice("dtype", DTYPE_ALIASES.get(dtype, dtype), ("auto", "float32", "bfloat16", "float16", "fp8"))
    validate.choice("kv_cache", kv_cache, ("dynamic", "static", "quantized", "offloaded"))
    validate.choice("kv_nbits", kv_nbits, KV_NBITS, "a quantized KV cache (quanto, what the trials run)")
    check_attn(attn)
    quant = Quantization.parse(quantization)
    budgets = parse_max_memory(max_memory)
    if budgets:  # the GPUs the budgets name (a CPU-only budget: no GPU at all)
        gpus = max([gpus, *(int(d[5:]) + 1 for d in budgets if d.startswith("cuda:"))])
    acc = find_accelerator(gpu) if gpu else None
    if acc is None and not cpu:
        from infertune.probe.hardware import detect_gpus

        found = detect_gpus()
        acc = from_detected_gpu(found[0].name, found[0].total_memory_bytes, calibrate=True) if found else None
    platform = "cpu" if acc is None else acc.platform
    if budgets and platform == "mps":
        raise UserError("--max-memory: Apple's unified memory is one device; give --gpu NAME for a CUDA card")
    if budgets and platform == "cpu" and any(d.startswith("cuda:") for d in budgets):
        raise UserError("--max-memory names GPUs but none is detected here; give --gpu NAME to estimate for one")
    model = model or store.DEFAULT_MODEL
    path = store.resolve(model, revision, say=say)
    prof = profile_model(path, trust_remote_code)
    resolved = resolve_dtype(dtype, prof.native_dtype)
    if acc is None:  # this CPU: measured once (it says so), then read from the cache
        acc = probe_cpu(say=say)
    base = EstimateSettings(
        dtype=resolved,
        quantization=quant,
        kv_cache=kv_cache,
        kv_nbits=kv_nbits,
        kv_residual_len=kv_residual_len,
        max_cache_len=cache_len,
        attn=attn,
        prefill_chunk=chunk,
        max_new_tokens=new_tokens,
        batch=batch,
        concurrency=concurrency,
        platform=platform,
    )
    rev = revision_of(path)
    results = [
        run_estimate(
            prof,
            base.model_copy(update={"input_len": n}),
            acc,
            model=store.command_name(model, path),
            gpus=gpus,
            max_memory=budgets,
            model_revision=rev,
        )
        for n in lengths
    ]
    return results[0] if len(results) == 1 else EstimateSweep(model_revision=rev, sweep=results)
