"""A trial process never outlives the process that started it, and leaves no folder behind for long.

`run_trial` names itself in the child's environment (`INFERTUNE_PARENT=pid:start-time`); the worker calls
`die_with_parent()` first thing. On Linux that asks the kernel for SIGKILL when the parent goes
(`prctl(PR_SET_PDEATHSIG)`; it fires when the parent *thread* that started the child exits, which in
`run_trial` is the thread that waits for it), then checks the parent is still there (it may have gone
before the request was made). Everywhere, a watchdog thread checks once a second that the parent is alive;
when it is not, it kills the trial's process group (the trial runs in a session of its own, so the group
holds only the trial and what it started: tensor-parallel ranks and torchrun, compile workers).

Trial folders are named `infertune-trial-*` and hold an `owner` file with the same token; `sweep()` (run
before each trial) removes those whose owner is gone: what a `kill -9` of an earlier parent left.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

PARENT_ENV = "INFERTUNE_PARENT"
TRIAL_DIR_ENV = "INFERTUNE_TRIAL_DIR"
ZYGOTE_ENV = "INFERTUNE_ZYGOTE"  # in a trial forked by measure/zygote.py: the pid of its direct parent, the zygote
PREFIX = "infertune-trial-"
PR_SET_PDEATHSIG = 1


def token(pid: int | None = None) -> str:
    """`pid:start-time` of a process (this one by default): a pid alone may be reused by another process."""
    p = psutil.Process(pid)
    return f"{p.pid}:{p.create_time():.2f}"


def alive(tok: str) -> bool:
    """Whether the process named by `token()` still runs (a zombie does not)."""
    try:
        pid, created = tok.split(":")
        p = psutil.Process(int(pid))
        return abs(p.create_time() - float(created)) < 0.05 and p.status() != psutil.STATUS_ZOMBIE
    except (ValueError, psutil.Error):
        return False


def _end(own_group: bool) -> None:
    if own_group:  # the trial's own session: this process and what it started
        with contextlib.suppress(OSError):
            os.killpg(os.getpgrp(), signal.SIGKILL)
    os._exit(137)


def _watch(tok: str, interval_s: float, own_group: bool) -> None:
    while alive(tok):
        time.sleep(interval_s)
    _end(own_group)


def set_pdeathsig(sig: int = signal.SIGKILL) -> bool:
    """Linux: `sig` to this process when its parent thread exits. False where it cannot be set."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(interval_s: float = 1.0) -> None:
    """Called by the trial worker at its start; does nothing outside a trial (no INFERTUNE_PARENT)."""
    tok = os.environ.get(PARENT_ENV)
    if not tok:
        return
    set_pdeathsig()
    parent = int(tok.split(":")[0])
    try:  # run_trial starts the trial in a session of its own: never kill a group the parent shares
        own_group = os.getpgid(parent) != os.getpgrp()
    except OSError:
        own_group = False
    direct = "LOCAL_RANK" not in os.environ  # under torchrun the direct parent is torchrun, not infertune
    zygote = os.environ.get(ZYGOTE_ENV)  # forked by the zygote, which itself dies with `parent`
    expected = int(zygote) if zygote else parent
    if not alive(tok) or (direct and os.getppid() != expected):
        _end(own_group)  # the parent went before the kernel was asked to tell us
    threading.Thread(target=_watch, args=(tok, interval_s, own_group), daemon=True, name="infertune-lifeline").start()


def trial_dir() -> Path:
    """A new trial folder owned by this process (removed by the caller; by `sweep` if this process dies)."""
    path = Path(tempfile.mkdtemp(prefix=PREFIX))
    (path / "owner").write_text(token(), encoding="ascii")
    return path


def sweep(root: Path | None = None) -> list[Path]:
    """Remove trial folders whose owner is gone; returns them. Folders without an owner file are left alone."""
    removed = []
    for d in Path(root or tempfile.gettempdir()).glob(PREFIX + "*"):
        try:
            owner = (d / "owner").read_text(encoding="ascii").strip()
        except OSError:
            continue
        if not alive(owner):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def launcher(parent: int | None = None) -> list[str]:
    """A command prefix that runs a program (a server we did not write) with the kernel's parent-death
    signal set: `[*launcher(), program, args...]`. The setting survives exec; no watchdog thread does."""
    return [sys.executable, "-m", "infertune.measure.lifeline", str(parent or os.getpid()), "--"]


def _exec(argv: list[str]) -> None:
    parent, sep, *cmd = argv
    if sep != "--" or not cmd:
        raise SystemExit("usage: python -m infertune.measure.lifeline PARENT_PID -- PROGRAM [ARGS...]")
    set_pdeathsig()
    if os.getppid() != int(parent):  # the parent went before the kernel was asked to tell us
        raise SystemExit(137)
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    _exec(sys.argv[1:])
