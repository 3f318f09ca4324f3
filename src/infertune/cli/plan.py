"""The verbs that answer without running the model: estimate and advise."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infertune.cli import quick
from infertune.cli.app import FormatOpt, ModelOpt, TrustOpt
from infertune.cli.quick import Format, ask_count


def estimate(
    model: ModelOpt = None,
    revision: str | None = None,
    dtype: Annotated[str, typer.Option(help="auto (checkpoint's), float32, bfloat16, float16, fp8")] = "auto",
    quantization: Annotated[
        str | None,
        typer.Option(
            help="weights as stored (default: the checkpoint's quantization_config), or none, bnb-int8, bnb-nf4[-dq], "
            "bnb-fp4[-dq], gptq[-4bit][-g128], awq, int8, int4[-g128], fp8, mxfp4, gguf-q4_k_m"
        ),
    ] = None,
    kv_cache: Annotated[str, typer.Option(help="dynamic, static, quantized, offloaded")] = "dynamic",
    kv_nbits: Annotated[int, typer.Option(help="bits of a quantized KV cache")] = 4,
    kv_residual_len: Annotated[int, typer.Option(help="newest tokens a quantized KV cache keeps unquantized")] = 128,
    max_cache_len: Annotated[str | None, typer.Option(help="static cache length (default: input + output)")] = None,
    attn: Annotated[str, typer.Option(help="sdpa, eager, flash_attention_2, ...")] = "sdpa",
    prefill_chunk: Annotated[str | None, typer.Option(help="queries per prefill pass (chunked prefill)")] = None,
    input_len: Annotated[str, typer.Option(help="prompt tokens; a list sweeps: 1k,8k,32k")] = "512",
    max_new_tokens: Annotated[str, typer.Option(help="generated tokens")] = "256",
    batch: Annotated[int, typer.Option(help="prompts per generate call")] = 1,
    concurrency: Annotated[int, typer.Option(help="requests in flight at once")] = 1,
    gpu: Annotated[str | None, typer.Option(help="GPU name (H100 SXM, A100 80GB, L4, ...); default: detected")] = None,
    gpus: Annotated[int, typer.Option(help="number of such GPUs (layers spread by device_map)")] = 1,
    max_memory: Annotated[
        str | None, typer.Option(help="device_map=auto budgets, e.g. 0=20GiB,1=20GiB,cpu=64GiB: shows what lands where")
    ] = None,
    cpu: Annotated[bool, typer.Option("--cpu", help="estimate for this host's CPU even if a GPU is present")] = False,
    trust_remote_code: TrustOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Estimate memory (by component), roofline speed and what fits, from config.json alone."""
    quick.estimate(
        fmt.value,
        model=model,
        revision=revision,
        dtype=dtype,
        quantization=quantization,
        kv_cache=kv_cache,
        kv_nbits=kv_nbits,
        kv_residual_len=kv_residual_len,
        max_cache_len=max_cache_len,
        attn=attn,
        prefill_chunk=prefill_chunk,
        input_len=input_len,
        max_new_tokens=max_new_tokens,
        batch=batch,
        concurrency=concurrency,
        gpu=gpu,
        gpus=gpus,
        max_memory=max_memory,
        cpu=cpu,
        trust_remote_code=trust_remote_code,
    )


def advise(
    workload: Annotated[Path | None, typer.Argument(help="workload file (YAML, TOML or JSON)")] = None,
    model: ModelOpt = None,
    revision: str | None = None,
    gpu: Annotated[str | None, typer.Option(help="target GPU (H100 SXM, A100 80GB, L4, T4, RTX 4090, ...)")] = None,
    gpus: Annotated[int, typer.Option(help="number of such GPUs")] = 1,
    vram: Annotated[str | None, typer.Option(help="GPU memory available, e.g. 20GiB (default: the card's)")] = None,
    cpu_ram: Annotated[
        str | None,
        typer.Option(
            help="CPU RAM, e.g. 64GiB: offloading beside a GPU, or a CPU target's memory (default: this host's)"
        ),
    ] = None,
    dtype: Annotated[str | None, typer.Option(help="current dtype: auto, float32, bfloat16, float16")] = None,
    attn: Annotated[str | None, typer.Option(help="current attention: sdpa, eager, flash_attention_2, ...")] = None,
    quantization: Annotated[
        str | None,
        typer.Option(
            help="current weight quantization: none, bnb-8bit, bnb-4bit, awq, gptq, torchao-int4, torchao-int8, "
            "quanto-int8"
        ),
    ] = None,
    kv_cache: Annotated[
        str | None, typer.Option(help="current KV cache: dynamic, static, quantized, offloaded")
    ] = None,
    compile: Annotated[bool, typer.Option("--compile", help="you already use a static cache + torch.compile")] = False,
    batching: Annotated[
        str | None, typer.Option(help="how concurrent requests are run now: serial, static, continuous")
    ] = None,
    device_map: Annotated[
        str | None, typer.Option(help="current placement: device_map, e.g. auto (over --gpus)")
    ] = None,
    tp: Annotated[int, typer.Option(min=1, help="current placement: tensor-parallel ranks (of --gpus)")] = 1,
    lib: Annotated[
        list[str] | None,
        typer.Option(help="the target's library version, NAME=VERSION (repeatable), e.g. bitsandbytes=0.39.1"),
    ] = None,
    observed: Annotated[
        list[str] | None,
        typer.Option(
            help="what you saw on the current setup, KEY=VALUE (repeatable): tpot=220ms, ttft=1.5s, e2e=12s, "
            "tokens_per_s=18, peak=23GiB"
        ),
    ] = None,
    oom: Annotated[
        str | None, typer.Option(help="where it ran out of memory: load, prefill, decode or host-ram")
    ] = None,
    cpu: Annotated[
        str | None,
        typer.Option(help="a CPU target by name (Xeon Platinum 8480+, EPYC 9654, Graviton3, Ryzen 9 7950X, ...)"),
    ] = None,
    cpu_flags: Annotated[
        str | None, typer.Option(help="the CPU target's ISA flags, e.g. avx512f,avx512_bf16,amx_bf16,amx_int8")
    ] = None,
    cores: Annotated[int | None, typer.Option(min=1, help="the CPU target's cores")] = None,
    input_len: Annotated[str | None, typer.Option(help="prompt tokens (1k, 32k, ...)")] = None,
    max_new_tokens: Annotated[str | None, typer.Option(help="generated tokens per request")] = None,
    batch: Annotated[int | None, typer.Option(help="prompts per generate call")] = None,
    concurrency: Annotated[int | None, typer.Option(help="requests in flight at once")] = None,
    measured: Annotated[
        Path | None,
        typer.Option(
            help="a trial of the current setup (measure --output FILE), or a tune run (its directory or "
            "report.json) whose serve stage measured serving engines: its numbers join the evidence"
        ),
    ] = None,
    no_input: Annotated[bool, typer.Option("--no-input", help="never ask; state assumptions instead")] = False,
    trust_remote_code: TrustOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Diagnose where the workload hurts and propose one compatible change to try next."""
    quick.advise(
        fmt.value,
        no_input,
        workload=workload,
        model=model,
        revision=revision,
        gpu=gpu,
        gpus=gpus,
        vram=vram,
        cpu_ram=cpu_ram,
        dtype=dtype,
        attn=attn,
        quantization=quantization,
        kv_cache=kv_cache,
        compile=compile,
        batching=batching,
        device_map=device_map,
        tp=tp,
        lib=lib,
        observed=observed,
        oom=oom,
        cpu=cpu,
        cpu_flags=cpu_flags,
        cores=cores,
        input_len=input_len,
        max_new_tokens=max_new_tokens,
        batch=batch,
        concurrency=concurrency,
        measured=measured,
        trust_remote_code=trust_remote_code,
    )


__all__ = ["advise", "ask_count", "estimate"]
