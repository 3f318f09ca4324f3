"""One server trial: start `transformers serve` (or an installed engine: vLLM) with a candidate's flags on
loopback, warm it up, load-test it, read its peak memory over all its processes, stop the whole process tree
(also on error and Ctrl-C). Used by `serve-trial` and by the tuner."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from infertune.core.errors import UserError
from infertune.core.schema import SCHEMA_VERSION
from infertune.serving import engines
from infertune.serving.loadtest import LevelResult, LoadTestResult, loadtest
from infertune.serving.server import ServeProcess


class ServeTrial(BaseModel):
    kind: Literal["measured"] = "measured"
    schema_version: str = SCHEMA_VERSION
    test: Literal["serve-trial"] = "serve-trial"
    engine: str = "transformers"  # transformers (serve), vllm, sglang
    command: str  # exactly what ran (its interpreter, loopback, the port it got)
    flags: list[str]  # the candidate's server flags (for that engine)
    log: str
    startup_s: float | None = None  # process start to the first healthy answer (engines compile first)
    peak_memory_bytes: int | None = None  # host memory high-water mark summed over all the server's processes
    server_peak_rss_bytes: int | None  # the same figure, under its first name (kept for one schema version)
    load: LoadTestResult

    def shell(self, model: str) -> str:
        """The command a user runs to serve this candidate (on loopback: put a proxy in front to expose it)."""
        head = {
            "transformers": ["transformers", "serve", model],
            "vllm": ["vllm", "serve", model],
            "sglang": ["python", "-m", "sglang.launch_server", "--model-path", model],
        }[self.engine]
        return shlex.join([*head, *self.flags, "--host", "127.0.0.1"])


def _server(
    engine: str, model_path: str, flags: list[str], log_path: Path, host: str, ready_timeout_s: float | None
) -> ServeProcess:
    if engine == "transformers":
        return ServeProcess([model_path, *flags], log_path, host=host, ready_timeout_s=ready_timeout_s or 300.0)
    e = engines.engine(engine)
    return ServeProcess(
        [],
        log_path,
        host=host,
        ready_timeout_s=ready_timeout_s or e.startup_s,
        command=engines.server_command(engine, model_path, flags),
        env=engines.server_env(engine),
        name=engine,
    )


def smoke(engine: str, model_path: str, flags: list[str], log_path: Path) -> str:
    """Start the engine on a model, ask one short chat completion, stop it: proof that it serves."""
    import httpx

    with _server(engine, model_path, flags, log_path, "127.0.0.1", None) as server:
        r = httpx.post(
            server.url + "/v1/chat/completions",
            timeout=server.ready_timeout_s,
            json={"model": model_path, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4},
        )
        if r.status_code != 200:
            raise UserError(f"{engine} started but answered {r.status_code}; log: {log_path}")
    return f"served a chat completion in {server.startup_s:.0f} s from start"


def run_serve_trial(
    model_path: str,
    flags: list[str],
    log_path: Path,
    levels: list[int],
    requests: int,
    max_new_tokens: int,
    conversations: list[list[dict]] | None = None,
    ready_timeout_s: float | None = None,
    on_level: Callable[[LevelResult], object] | None = None,
    on_phase: Callable[[str], object] | None = None,
    host: str = "127.0.0.1",
    engine: str = "transformers",
) -> ServeTrial:
    """Raises UserError when the server does not come up (its log says why). `host`: loopback unless the
    caller means otherwise. `ready_timeout_s` defaults to the engine's start-up budget."""
    import httpx

    say = on_phase or (lambda phase: None)
    server = _server(engine, model_path, flags, log_path, host, ready_timeout_s)
    say(f"starting {server.name} on {server.url} (start-up budget {server.ready_timeout_s:g} s)")
    server.__enter__()
    try:
        say("warming up (the first request loads the model)")
        httpx.post(
            server.url + "/v1/chat/completions",
            timeout=server.ready_timeout_s,
            json={"model": model_path, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
        )
        say("load test")
        res = loadtest(
            server.url,
            model_path,
            levels,
            requests,
            None,
            max_new_tokens,
            None,
            None,
            on_level=on_level,
            conversations=conversations,
        )
        peak = server.peak_rss_bytes()
    finally:
        server.stop()
    return ServeTrial(
        engine=engine,
        command=shlex.join(server.cmd),
        flags=flags,
        log=str(server.log_path),
        startup_s=server.startup_s,
        peak_memory_bytes=peak,
        server_peak_rss_bytes=peak,
        load=res,
    )
