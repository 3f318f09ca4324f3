"""A Hugging Face Hub on loopback for the tests: olah (PyPI) in offline mode serves git repositories built in the
test as Hub repositories, and a small gate in front of it answers like the Hub does for a gated model.

olah, offline, with `mirrors-path = [DIR]`, serves every git repository at DIR/models/ORG/NAME: file resolution
(HEAD/GET /ORG/NAME/resolve/REV/FILE with the commit in X-Repo-Commit), which is what hf_hub_download,
get_safetensors_metadata and snapshot_download use. It cannot gate, so `Gate` (a threaded HTTP handler in the
test process) forwards every request to olah, records it (method, path, Range header), and refuses the gated
repositories the way huggingface.co does: 401 (no token) or 403 (a token without access) with
`X-Error-Code: GatedRepo`, which huggingface_hub turns into GatedRepoError. Nothing here reaches the internet.
"""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "server", "date"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def git_commit(repo: Path, message: str) -> str:
    """Commit everything in `repo` (initialised on first use, branch main); returns the commit hash."""
    git = ["git", "-C", str(repo), "-c", "user.name=infertune-tests", "-c", "user.email=tests@infertune.invalid"]
    if not (repo / ".git").exists():
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", message], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


class Olah:
    """`python -m olah.server` as a child process this object owns: started on a free loopback port, stopped
    (and reaped) by `stop`, also when the start-up fails."""

    def __init__(self, mirrors: Path, workdir: Path):
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "olah.toml"
        config.write_text(
            f'[basic]\nhost = "127.0.0.1"\nport = {self.port}\nmirrors-path = ["{mirrors}"]\n'
            f'repos-path = "{workdir / "repos"}"\n\n[accessibility]\noffline = true\n'
        )
        self.log = workdir / "olah.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "olah.server", "-c", str(config)],
                cwd=workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, probe: str, timeout_s: float = 90) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"olah exited: {self.log.read_text(errors='replace')[-2000:]}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("HEAD", probe)
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"olah not ready after {timeout_s} s: {self.log.read_text(errors='replace')[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Gate:
    """A loopback front for olah that gates some repositories and records every request."""

    def __init__(self, upstream_port: int, gated: set[str], token: str):
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range header)
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args):  # keep the test output clean
                pass

            def _handle(self):
                gate.requests.append((self.command, self.path, self.headers.get("Range")))
                repo = "/".join(self.path.split("?")[0].removeprefix("/api/models/").strip("/").split("/")[:2])
                if repo in gated:
                    auth = self.headers.get("Authorization")
                    if auth != f"Bearer {token}":
                        self.send_response(401 if auth is None else 403)
                        self.send_header("X-Error-Code", "GatedRepo")
                        self.send_header("X-Error-Message", f"Access to model {repo} is restricted.")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, headers=headers)
                resp = conn.getresponse()
                body = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP:
                        self.send_header(k, v)
                length = resp.getheader("Content-Length") if self.command == "HEAD" else str(len(body))
                if length is not None:
                    self.send_header("Content-Length", length)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
                conn.close()

            do_GET = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
