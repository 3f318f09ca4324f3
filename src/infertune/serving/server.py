"""A server process for one trial: loopback, a free port, its own process group, a kept log.

`transformers serve` is started with this interpreter (`python -m transformers.cli.transformers serve`), so it
runs the same library stack the rest of infertune measures; another engine (vLLM) runs from its own environment
(`serving.engines`). Stopped on exit whatever happens (error, Ctrl-C): SIGTERM to the whole group, then to every
process of the tree that left it, SIGKILL after a grace period; nothing is left behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from infertune.core.errors import UserError
from infertune.measure.memory import vm_hwm
from infertune.measure.trial import free_port


class ServeProcess:
    """`args` go to `transformers serve` (the default), or `command(host, port)` builds another engine's
    command line; `env` replaces the environment (engines run from their own)."""

    def __init__(
        self,
        args: list[str],
        log_path: Path,
        host: str = "127.0.0.1",
        port: int | None = None,
        ready_timeout_s: float = 300.0,
        python: str = sys.executable,
        command: Callable[[str, int], list[str]] | None = None,
        env: dict[str, str] | None = None,
        name: str = "transformers serve",
    ):
        self.host, self.port = host, port or free_port(host)
        self.cmd = (
            command(self.host, self.port)
            if command
            else [
                python,
                "-m",
                "transformers.cli.transformers",
                "serve",
                *args,
                "--host",
                self.host,
                "--port",
                str(self.port),
            ]
        )
        self.log_path, self.ready_timeout_s = Path(log_path), ready_timeout_s
        self.env, self.name = env, name
        self.proc: subprocess.Popen | None = None
        self.started_at: float | None = None
        self.startup_s: float | None = None  # from the start of the process to the first healthy answer

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> ServeProcess:
        import httpx

        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")
        env = dict(self.env if self.env is not None else os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
        self.started_at = time.monotonic()
        from infertune.measure.lifeline import launcher

        # the server dies with this process (kill -9 included): the kernel's parent-death signal, set before exec
        self.proc = subprocess.Popen(
            [*launcher(), *self.cmd],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        log.close()
        deadline = self.started_at + self.ready_timeout_s
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise UserError(
                        f"{self.name} exited with code {self.proc.returncode} before it was ready; log: {self.log_path}"
                    )
                try:
                    if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                        self.startup_s = time.monotonic() - self.started_at
                        return self
                except httpx.HTTPError:
                    pass
                time.sleep(0.5)
            raise UserError(f"{self.name} was not ready after {self.ready_timeout_s:g} s; log: {self.log_path}")
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM to the group and to every descendant (an engine's workers may start sessions of their
        own), SIGKILL to whatever is still alive after `grace_s`."""
        import psutil

        p = self.proc
        if p is None or p.poll() is not None:
            return
        try:
            tree = [psutil.Process(p.pid), *psutil.Process(p.pid).children(recursive=True)]
        except psutil.Error:
            tree = []
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, sig)
            for q in tree:
                with contextlib.suppress(psutil.Error):
                    q.send_signal(sig)
            if not psutil.wait_procs(tree, timeout=grace_s)[1]:
                break
        p.wait()

    def peak_rss_bytes(self) -> int | None:
        """The server's resident-memory high-water mark (Linux VmHWM, children included) while it runs;
        None where the kernel does not keep one. Host memory: GPU memory is not in it."""
        import psutil

        if self.proc is None or self.proc.poll() is not None:
            return None
        try:
            server = psutil.Process(self.proc.pid)
            return sum(vm_hwm(p.pid) for p in [server, *server.children(recursive=True)])
        except (OSError, psutil.Error):
            return None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
