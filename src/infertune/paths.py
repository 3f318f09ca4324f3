"""Where infertune keeps its files, and how it writes them so a crash never leaves half a file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def home() -> Path:
    """infertune's cache dir: `$INFERTUNE_HOME`, default `~/.cache/infertune`."""
    env = os.environ.get("INFERTUNE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "infertune"


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


def check_output(path: str | Path | None, label: str, kind: str = "file") -> Path | None:
    """Refuse, before any work, an output that cannot be written: a folder where a file goes (or the
    reverse), a file in the way of a folder to create, a place that is not writable. Creates nothing."""
    from infertune.errors import UserError

    if path is None:
        return None
    p = Path(path).expanduser()
    if kind == "file" and p.is_dir():
        raise UserError(f"{label} {p}: is a folder; give a file path (e.g. {p / 'result.json'})")
    if kind == "dir" and p.exists() and not p.is_dir():
        raise UserError(f"{label} {p}: is a file; give a folder (it is created when missing)")
    base = p if kind == "dir" else p.parent
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise UserError(f"{label} {p}: {base} is a file, so nothing can be created under it")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UserError(f"{label} {p}: {base} is not writable")
    if kind == "file" and p.exists() and not os.access(p, os.W_OK):
        raise UserError(f"{label} {p}: the file exists and is not writable")
    return p
