"""One server trial: start `transformers serve` with a candidate's flags on loopback, warm it up, load-test
it, read its peak memory, stop it (also on error and Ctrl-C). Used by `serve-trial` and by the tuner."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from infertune.schema import SCHEMA_VERSION
from infertune.serving.loadtest import LoadTestResult, loadtest
from infertune.serving.server import ServeProcess


class ServeTrial(BaseModel):
    kind: Literal["measured"] = "measured"
    schema_version: str = SCHEMA_VERSION
    test: Literal["serve-trial"] = "serve-trial"
    command: str  # exactly what ran (this interpreter, loopback, the port it got)
    flags: list[str]  # the candidate's `transformers serve` flags
    log: str
    server_peak_rss_bytes: int | None  # host memory high-water mark of the server (Linux); GPU memory not in it
    load: LoadTestResult

    def shell(self, model: str) -> str:
        """The command a user runs to serve this candidate (on loopback: put a proxy in front to expose it)."""
        return shlex.join(["transformers", "serve", model, *self.flags, "--host", "127.0.0.1"])


def run_serve_trial(model_path: str, flags: list[str], log_path: Path, levels: list[int], requests: int,
                    max_new_tokens: int, conversations: list[list[dict]] | None = None,
                    ready_timeout_s: float = 300.0, on_level=None, on_phase=None,
                    host: str = "127.0.0.1") -> ServeTrial:
    """Raises UserError when the server does not come up (its log says why). `host`: loopback unless the
    caller means otherwise."""
    import httpx

    say = on_phase or (lambda phase: None)
    server = ServeProcess([model_path, *flags], log_path, host=host, ready_timeout_s=ready_timeout_s)
    say(f"starting transformers serve on {server.url}")
    server.__enter__()
    try:
        say("warming up (the first request loads the model)")
        httpx.post(server.url + "/v1/chat/completions", timeout=ready_timeout_s,
                   json={"model": model_path, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
        say("load test")
        res = loadtest(server.url, model_path, levels, requests, None, max_new_tokens, None, None,
                       on_level=on_level, conversations=conversations)
        peak = server.peak_rss_bytes()
    finally:
        server.stop()
    return ServeTrial(command=shlex.join(server.cmd), flags=flags, log=str(server.log_path),
                      server_peak_rss_bytes=peak, load=res)
