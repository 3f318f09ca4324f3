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

