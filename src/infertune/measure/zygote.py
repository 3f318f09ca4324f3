"""A warm start for trials: one process imports torch and transformers once, then forks a fresh child per trial.

A cold trial spends about 5 s of its 12 s (SmolLM2 on 2 CPU cores) importing torch, transformers and the model's
modeling code before it loads a weight; a tune runs 20-40 trials. Inside `with warm_start():` `run_trial` asks
this launcher (the "zygote", as Android names the process its apps fork from) for each child instead of starting
an interpreter. The child is as isolated as a cold one: its own process, its own session (a timeout or Ctrl-C
kills its group), its own environment, stdout and log; it runs the same `worker.main`. The zygote never runs a
tensor operation and never touches a GPU, so nothing it forks carries a thread pool or a CUDA context.

What changes in the figures: a trial's `load_s` no longer includes importing the model's modeling module (it is
imported once, in the zygote); the time a server pays once at start-up. Candidate and incumbent of a tune run the
same way, so their comparison does not change.

Protocol (a SOCK_SEQPACKET pair, one message per packet): the parent sends `{"argv", "env", "log"}` with the write
end of a pipe as ancillary data (the child's stdout); the zygote answers `{"ready"}` once after its imports, `{"pid"}`
per fork, and `{"exit", "status"}` when that child ends. The first and last carry CPU time (the imports', the
trial's), which the parent counts as its own when it tells whether others kept the machine busy (measure/machine.py):
getrusage sees only the children a process reaps. The zygote dies with its parent (lifeline), its children with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

from infertune.measure import lifeline
from infertune.measure.machine import add_own_cpu

_PACKET = 1 << 16
_PER_TRIAL = (lifeline.PARENT_ENV, lifeline.TRIAL_DIR_ENV, lifeline.ZYGOTE_ENV)


def base_env() -> dict[str, str]:
    """Every trial's environment but its two per-trial names (lifeline's parent token and trial folder). Libraries
    read some of it at import (huggingface_hub reads HF_HUB_OFFLINE), so a zygote serves only trials whose
    environment is the one it imported under."""
    env = dict(os.environ)
    env.update(
        PYTHONUNBUFFERED="1",
        HF_HUB_OFFLINE="1",  # a trial never downloads: what it measures is what is on disk
        TOKENIZERS_PARALLELISM="false",
        TRANSFORMERS_NO_ADVISORY_WARNINGS="1",
    )
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # torch and NVML then number GPUs the same way
    for name in _PER_TRIAL:
        env.pop(name, None)
    return env


class Child:
    """A forked trial, with the part of `subprocess.Popen` that run_trial uses."""

    def __init__(self, pid: int, stdout: IO[bytes], done: Future[int]) -> None:
        self.pid, self.stdout, self._done = pid, stdout, done
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        try:
            self.returncode = self._done.result(timeout)
        except TimeoutError:
            raise subprocess.TimeoutExpired("trial", timeout or 0) from None
        return self.returncode


class Zygote:
    """The parent's handle on one zygote process (thread-safe: trials may start from several threads)."""

    def __init__(self, model_path: str | None = None) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.env = base_env()
        env = dict(self.env, **{lifeline.PARENT_ENV: lifeline.token()})
        argv = [sys.executable, "-m", "infertune.measure.zygote", str(theirs.fileno()), model_path or ""]
        self.proc = subprocess.Popen(
            argv,
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # a launcher that fails is replaced by cold starts (run_trial)
            env=env,
            start_new_session=True,
        )
        theirs.close()
        self._sock, self._lock, self._state = ours, threading.Lock(), threading.Lock()
        self._started: Future[int] | None = None
        self._exits: dict[int, Future[int]] = {}
        self._early: dict[int, int] = {}
        threading.Thread(target=self._read, daemon=True, name="infertune-zygote").start()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def serves(self, env: dict[str, str]) -> bool:
        """Whether a trial with `env` may fork from here: the same environment as the zygote imported under."""
        return self.alive() and {k: v for k, v in env.items() if k not in _PER_TRIAL} == self.env

    def spawn(self, argv: list[str], env: dict[str, str], log: Path) -> Child:
        """Fork a child that runs `python -m infertune.measure.worker *argv` with `env`, stderr to `log`."""
        read_end, write_end = os.pipe()
        try:
            with self._lock:
                self._started = started = Future[int]()
                msg = json.dumps({"argv": argv, "env": env, "log": str(log)}).encode()
                try:
                    socket.send_fds(self._sock, [msg], [write_end])
                    pid = started.result(timeout=300)  # the zygote answers once it has imported (seconds)
                except BaseException:  # no answer: never let it fork this trial later, beside the cold start
                    os.close(read_end)
                    self.close()
                    raise
            with self._state:
                done = self._exits.setdefault(pid, Future())
                if pid in self._early:
                    done.set_result(self._early.pop(pid))
        finally:
            os.close(write_end)
        return Child(pid, os.fdopen(read_end, "rb"), done)

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(_PACKET)
            except OSError:
                data = b""
            if not data:  # the zygote is gone, and its children with it (the lifeline's SIGKILL)
                with self._state:
                    if self._started is not None and not self._started.done():
                        self._started.set_exception(RuntimeError("the trial launcher died"))
                    for f in self._exits.values():
                        if not f.done():
                            f.set_result(-signal.SIGKILL)
                return
            msg = json.loads(data)
            if "ready" in msg:  # its imports, which ran inside the first trial's window: ours, not another's
                add_own_cpu(msg["cpu_s"])
            elif "pid" in msg and self._started is not None:
                self._started.set_result(msg["pid"])
            elif "exit" in msg:
                code = os.waitstatus_to_exitcode(msg["status"])
                add_own_cpu(msg.get("cpu_s", 0.0))  # before the waiter wakes: the trial's Watch counts it as ours
                with self._state:
                    future = self._exits.get(msg["exit"])
                    if future is None:
                        self._early[msg["exit"]] = code  # ended before spawn() registered it
                    else:
                        future.set_result(code)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


_active: list[Zygote] = []


@contextlib.contextmanager
def warm_start(model_path: str | Path | None = None, enabled: bool = True) -> Iterator[Zygote | None]:
    """Trials started by `run_trial` in this block fork from one warm process (Linux; elsewhere, or with
    INFERTUNE_COLD_TRIALS=1, each trial starts its own interpreter as before)."""
    if (
        not enabled
        or not hasattr(os, "fork")
        or not sys.platform.startswith("linux")
        or os.environ.get("INFERTUNE_COLD_TRIALS")
    ):
        yield None
        return
    z = Zygote(str(model_path) if model_path else None)
    _active.append(z)
    try:
        yield z
    finally:
        _active.remove(z)
        z.close()


def current() -> Zygote | None:
    """The innermost live zygote, if a `warm_start` block is open."""
    return next((z for z in reversed(_active) if z.alive()), None)


# --- the zygote process itself ---------------------------------------------------------------------------


def _preload(model_path: str) -> None:
    """Import what every trial imports (no tensor operation, no CUDA): torch, transformers' auto classes, the
    tokenizer classes, generation, the worker; and the model's own modeling module when its config is local."""
    import torch  # noqa: F401
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast  # noqa: F401

    import infertune.measure.worker  # noqa: F401

    transformers.utils.logging.disable_progress_bar()
    if model_path:
        with contextlib.suppress(Exception):  # remote code, an unknown class: imported by the trial instead
            config = AutoConfig.from_pretrained(model_path)
            AutoModelForCausalLM._model_mapping[type(config)]


def _child(sock: socket.socket, wakeup: tuple[int, int], req: dict[str, Any], out_fd: int) -> None:
    code = 1
    try:
        os.setsid()  # a session of its own: the parent kills the trial's group
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for fd in wakeup:
            os.close(fd)
        os.environ.clear()
        os.environ.update(req["env"], **{lifeline.ZYGOTE_ENV: str(os.getppid())})
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(out_fd, 1)
        os.close(out_fd)
        os.dup2(os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
        from infertune.measure import worker

        code = worker.main(req["argv"])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _serve(fd: int, model_path: str) -> None:
    lifeline.die_with_parent()
    _preload(model_path)
    sock = socket.socket(fileno=fd)
    me = resource.getrusage(resource.RUSAGE_SELF)
    sock.send(json.dumps({"ready": True, "cpu_s": me.ru_utime + me.ru_stime}).encode())
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while True:
        ready, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
        while True:  # every child that ended
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            cpu_s = usage.ru_utime + usage.ru_stime  # the trial's CPU time, which the parent cannot read itself
            sock.send(json.dumps({"exit": pid, "status": status, "cpu_s": cpu_s}).encode())
        if sock.fileno() in ready:
            msg, fds, _, _ = socket.recv_fds(sock, _PACKET, 1)
            if not msg:  # the parent closed its end
                return
            pid = os.fork()
            if pid == 0:
                _child(sock, (wake_r, wake_w), json.loads(msg), fds[0])
            os.close(fds[0])
            sock.send(json.dumps({"pid": pid}).encode())


if __name__ == "__main__":
    _serve(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "")
