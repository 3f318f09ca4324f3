"""Kept answers: a `profile`, `estimate` or `advise` asked again prints what it printed before, without pydantic.

These verbs are pure functions of their inputs, but importing the models they are built from (pydantic, ~25
classes) costs ten bare interpreter starts (benchmarks/estimate_startup.py). So a plain command line's output
is kept under INFERTUNE_HOME/answers, named by a hash of everything it was computed from that cannot be read
from a file's size and time: the verb and its flags, the environment variables that steer infertune, torch,
transformers and the terminal, whether stdout is a terminal (and its size), the interpreter, infertune's own
source files, the folders on `sys.path` (an install or upgrade changes them) and the host (CPU, RAM, NVIDIA
GPUs). Beside the output, the entry lists the files the answer was read from (the model folder, the CPU probe,
the calibration, the installed engines) with their sizes and times: it is replayed only while every one of them
is unchanged.

Not kept: hub ids (a newer revision may exist), remote code, answers resting on a calibration taken on a busy
machine (it is measured again once the machine is quieter), and an `advise` that asks questions at a terminal,
reads a workload file or a measured run, or runs on a host with a GPU driver (the free VRAM of the moment
counts). `INFERTUNE_NO_ANSWER_CACHE=1` turns it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

VERSION = 1
VERBS = ("profile", "estimate", "advise")
KEEP = 256  # entries; the oldest go first
ENV_PREFIXES = (
    "INFERTUNE_",
    "HF_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "TORCH",
    "PYTORCH_",
    "CUDA_",
    "OMP_",
    "MKL_",
    "PYDANTIC_",
)
ENV_NAMES = (
    "COLUMNS",
    "LINES",
    "TERM",
    "NO_COLOR",
    "FORCE_COLOR",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "JUPYTER_COLUMNS",
    "JUPYTER_LINES",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "HOME",
    "XDG_CACHE_HOME",
)


def entry(verb: str, flags: dict[str, Any]) -> Path | None:
    """Where this command line's answer is kept; None when it is not to be kept (see the module's docstring)."""
    if verb not in VERBS or os.environ.get("INFERTUNE_NO_ANSWER_CACHE") == "1" or flags.get("trust_remote_code"):
        return None
    if verb == "advise":  # not when it asks questions, reads files given to it, or a GPU's free memory counts
        from infertune.probe.host import no_gpu_driver

        terminal = _tty(sys.stdin) and _tty(sys.stdout)
        asks = terminal and not flags.get("no_input") and flags.get("fmt", "table") == "table"
        if asks or flags.get("workload") or flags.get("measured") or not no_gpu_driver():
            return None
    from infertune.core.paths import home

    h = hashlib.sha256(repr(_key(verb, flags)).encode())
    return home() / "answers" / f"{verb}-{h.hexdigest()[:32]}.json"


def _tty(stream: Any) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def replay(path: Path | None) -> bool:
    """Print the answer kept at `path` (`entry`) and return True, or return False (nothing printed) when none
    holds."""
    if path is None:
        return False
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        if kept.get("deps") != _stats(kept["deps"]):
            return False
        sys.stdout.write(kept["stdout"])
        sys.stdout.flush()
        return True
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def keeping(path: Path | None, flags: dict[str, Any], run: Callable[..., object]) -> object:
    """Run the verb, its stdout passing through as it is written, and keep what it printed at `path` once it
    succeeded (`path` None: just run it)."""
    if path is None:
        return run(**flags)
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    try:
        code = run(**flags)
    finally:
        sys.stdout = tee.stream
    if code in (None, 0):
        with contextlib.suppress(OSError, ValueError):  # a kept answer is a convenience: never why a command fails
            _keep(path, flags, "".join(tee.written))
    return code


class _Tee:
    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.written: list[str] = []

    def write(self, text: str) -> int:
        self.written.append(text)
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, flush: the real stream's
        return getattr(self.stream, name)


def _keep(path: Path, flags: dict[str, Any], stdout: str) -> None:
    from infertune.core.paths import home, write_atomic
    from infertune.estimate.calibration import BUSY_LOAD, cache_path
    from infertune.models import store

    spec = flags.get("model") or store.DEFAULT_MODEL
    if store.ALIASES.get(spec, spec) not in store.EMBEDDED and not Path(spec).expanduser().is_dir():
        return  # a hub id: the hub may hold a newer revision than the one this answer read
    folder = store.resolve(spec, flags.get("revision"), prepare_missing=False)
    cal = cache_path("cpu")
    if cal.is_file() and (json.loads(cal.read_text(encoding="utf-8")).get("load_per_core") or 0) > BUSY_LOAD:
        return
    engines = sorted((home() / "engines").glob("*/engine.json"))
    deps = [
        folder,
        *_files(folder),
        home() / "cpu-probe.json",
        cal.parent,
        *_files(cal.parent),
        home() / "engines",
        *engines,
    ]
    write_atomic(path, json.dumps({"deps": _stats([str(p) for p in deps]), "stdout": stdout}))
    kept = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime)
    for old in kept[:-KEEP]:
        old.unlink(missing_ok=True)


def _files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_file())
    except OSError:
        return []


def _stats(paths: Any) -> dict[str, list[int] | None]:
    """Each path's size and modification time (None: it does not exist); a folder's time changes when a file
    is added to it or removed."""
    out: dict[str, list[int] | None] = {}
    for p in paths:
        try:
            st = os.stat(p)
            out[p] = [st.st_size, st.st_mtime_ns]
        except OSError:
            out[p] = None
    return out


def _key(verb: str, flags: dict[str, Any]) -> tuple:
    from infertune.probe.host import host_fingerprint, nvidia_gpus

    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(ENV_PREFIXES) or k in ENV_NAMES)
    tty = _tty(sys.stdout)
    try:
        size = tuple(os.get_terminal_size(sys.stdout.fileno())) if tty else None
    except (AttributeError, ValueError, OSError):
        size = None
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        ram = None
    path_dirs = sorted(_stats(p for p in sys.path if p and os.path.isdir(p)).items())
    return (
        VERSION,
        verb,
        sorted((k, repr(v)) for k, v in flags.items()),
        env,
        tty,
        size,
        sys.executable,
        sys.version,
        _source(),
        path_dirs,
        host_fingerprint("cpu"),
        nvidia_gpus(),
        ram,
        os.getcwd(),
    )


def _source() -> list[tuple[str, int, int]]:
    """infertune's own source files (an edit or an upgrade changes the answers)."""
    root = Path(__file__).resolve().parents[1]
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                found.append((os.path.join(folder, name), st.st_size, st.st_mtime_ns))
    return sorted(found)
