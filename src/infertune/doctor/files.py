"""Which files a check reads, named one way for the checker and the findings cache (standard library only: no
pathlib, whose import with urllib.parse and ipaddress cost a fresh check more than its rules' own set-up)."""

from __future__ import annotations

import os

SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", "site-packages", ".tox", "build", "dist"}


def as_path(text: str) -> str:
    """`str(Path(text))` without pathlib: redundant '/' and '.' parts dropped ('//x' kept, as POSIX allows)."""
    if text.startswith("//") and not text.startswith("///"):
        return text
    parts = [p for p in text.split("/") if p not in ("", ".")]
    root = "/" if text.startswith("/") else ""
    return root + "/".join(parts) or root or "."


def python_files(paths: list[str]) -> tuple[list[str], list[str]]:
    """Files to check (folders walked for *.py, tool and hidden folders skipped) and the inputs that are missing."""
    files: list[str] = []
    missing: list[str] = []
    for given in paths:
        p = as_path(given)
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
                base = as_path(root)
                files += [(base + "/" + n if base != "/" else "/" + n) for n in sorted(names) if n.endswith(".py")]
        elif os.path.isfile(p):
            files.append(p)
        else:
            missing.append(p)
    return files, missing
