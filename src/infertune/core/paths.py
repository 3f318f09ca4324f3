"""Where infertune keeps its files, and how it writes them so a crash never leaves half a file."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from infertune.core.errors import UserError


def home() -> Path:
    """infertune's cache dir: `$INFERTUNE_HOME`, default `~/.cache/infertune`."""
    env = os.environ.get("INFERTUNE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "infertune"


def append_line(path: Path, line: str) -> None:
    """Append `line` to a JSON-lines file on a line of its own, fsynced before returning. A line a kill cut short
    (the file does not end in a newline) is closed first, so it stays one unreadable line the reader skips and
    never swallows this one."""
    with open(path, "a+b") as fh:
        fh.seek(0, os.SEEK_END)
        cut = fh.tell() > 0 and (fh.seek(-1, os.SEEK_END), fh.read(1))[1] != b"\n"
        fh.write((b"\n" if cut else b"") + line.encode("utf-8") + b"\n")
        fh.flush()
        os.fsync(fh.fileno())


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temp file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; the file is as shareable as any other
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, obj: object) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def _probe_writable(folder: Path) -> str | None:
    """Why nothing can be created in `folder` (None: it can): a real file is created and removed."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".infertune-probe-", dir=folder)
        os.close(fd)
        os.unlink(tmp)
        return None
    except OSError as e:
        return e.strerror or str(e)


def check_output(path: str | Path | None, kind: Literal["file", "dir", "run"], flag: str = "--output") -> None:
    """Refuse, before any work starts, a path a command could not write: one line (UserError, exit 2).

    `file`: a file to (over)write; `dir`: a folder to create or fill; `run`: an existing tune run folder
    (its reports are rewritten there)."""
    if path is None:
        return
    p = Path(path).expanduser()
    if kind == "run":
        if not p.exists():
            raise UserError(f"{p}: no such run folder (infertune tune --output DIR makes one)")
        if not p.is_dir():
            raise UserError(f"{p} is a file, not a run folder (infertune tune --output DIR makes one)")
        return
    if kind == "file" and p.is_dir():
        raise UserError(f"{flag} {p} is a folder: give a file name")
    elif kind == "dir" and p.exists() and not p.is_dir():
        raise UserError(f"{flag} {p} is a file: give a folder")
    target = p if kind != "file" else p.parent
    existing = target
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{flag} {p}: {existing} is a file, so nothing can be created under it")
    why = _probe_writable(existing)
    if why is not None:
        raise UserError(f"{flag} {p}: cannot write in {existing} ({why})")
    if kind == "file" and p.exists() and not os.access(p, os.W_OK):
        raise UserError(f"{flag} {p}: the file is not writable")


def write_or_print(path: Path, text: str, say: Callable[[str], None]) -> bool:
    """Write a finished result to `path`; when that fails, print it to stdout instead and say so: nothing
    measured is lost. False when it could not be written."""
    try:
        write_atomic(path, text)
        return True
    except OSError as e:
        sys.stdout.write(text)
        sys.stdout.flush()
        say(f"could not write {path}: {e.strerror or e}; the result is printed above instead")
        return False
