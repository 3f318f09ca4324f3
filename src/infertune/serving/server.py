"""A `transformers serve` process for one trial: loopback, a free port, its own process group, a kept log.

Started with this interpreter (`python -m transformers.cli.transformers serve`), so it runs the same
library stack the rest of infertune measures. Stopped on exit whatever happens (error, Ctrl-C): SIGTERM
to the whole group, SIGKILL after a grace period; nothing is left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from infertune.errors import UserError
from infertune.measure.memory import vm_hwm
from infertune.measure.trial import free_port


class ServeProcess:
    def __init__(self, args: list[str], log_path: Path, host: str = "127.0.0.1", port: int | None = None,
                 ready_timeout_s: float = 300.0, python: str = sys.executable):
        self.host, self.port = host, port or free_port(host)
        self.cmd = [python, "-m", "transformers.cli.transformers", "serve", *args, "--host", self.host,
                    "--port", str(self.port)]
        self.log_path, self.ready_timeout_s = Path(log_path), ready_timeout_s
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> ServeProcess:
        import httpx

        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")
        env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)
        log.close()
        deadline = time.monotonic() + self.ready_timeout_s
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise UserError(f"transformers serve exited with code {self.proc.returncode} before it was "
                                    f"ready; log: {self.log_path}")
                try:
                    if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
                time.sleep(0.5)
            raise UserError(f"transformers serve was not ready after {self.ready_timeout_s:g} s; log: {self.log_path}")
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, grace_s: float = 10.0) -> None:
        p = self.proc
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        except ProcessLookupError:
            pass

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
