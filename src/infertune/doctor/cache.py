"""The command line's findings cache (like ruff's): an unchanged file is answered from its last check without
loading a rule. Built-in modules only (os, sys, marshal, _blake2), so a hit costs a few milliseconds.

One entry per file and way of asking, under `$INFERTUNE_HOME/doctor/` (default `~/.cache/infertune/doctor/`),
named by a digest of: the doctor's own code (each module's size and modification time), the Python version, the
working folder, the file's path as given, --select, --ignore, --target-version and the Hugging Face cache
variables. It holds the digest of the file's bytes, the stamp (modification time and size, or absent) of every
path the check looked at (the folders walked for version pins, the pin files, a checkpoint's folder and files
here), and the findings. An entry is used only when the bytes and every stamp are the same; anything else is a
miss, and a miss checks every file as before and rewrites their entries. A file that could not be read or
parsed, or a run where a rule failed, writes nothing. `--no-cache` or `INFERTUNE_NO_DOCTOR_CACHE=1` turns it off.
"""

from __future__ import annotations

import marshal
import os
import sys
from _blake2 import blake2b

from infertune.doctor.files import python_files as walk

HF_VARIABLES = ("HF_HUB_CACHE", "HF_HOME")


class Row:
    """A finding read back from the cache: the attributes the outputs read (`doctor.nodes.Finding`'s)."""

    __slots__ = ("col", "fix", "line", "message", "path", "rule")

    def __init__(self, path: str, line: int, col: int, rule: str, message: str, fix: str) -> None:
        self.path, self.line, self.col, self.rule, self.message, self.fix = path, line, col, rule, message, fix

    def model_dump(self) -> dict:
        return {k: getattr(self, k) for k in ("path", "line", "col", "rule", "message", "fix")}


def enabled(no_cache: bool) -> bool:
    return not no_cache and os.environ.get("INFERTUNE_NO_DOCTOR_CACHE") != "1"


def folder() -> str:
    home = os.environ.get("INFERTUNE_HOME")
    return os.path.join(os.path.expanduser(home) if home else os.path.expanduser("~/.cache/infertune"), "doctor")


PIN_FILES = ("pyproject.toml", "setup.py", "setup.cfg", ".git")  # (doctor.version's, and the root marker)


def stamp(kind: str, path: str) -> object:
    """What an entry remembers of a path the check looked at (see `doctor.checkpoint.note`); None when absent."""
    try:
        if kind == "pins":
            return sorted(
                n for n in os.listdir(path) if n in PIN_FILES or (n.startswith("requirements") and n.endswith(".txt"))
            )
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def code_stamp() -> list:
    """The doctor's own modules (this package and its rules): any edit or upgrade moves it."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    for d in (here, os.path.join(here, "rules")):
        with os.scandir(d) as it:
            out += sorted((e.path, e.stat().st_mtime_ns, e.stat().st_size) for e in it if e.name.endswith(".py"))
    return out


def python_files(paths: list[str]) -> list[str] | None:
    """The files the check would read, named as it names them; None on a missing path (the full check answers)."""
    files, missing = walk(paths)
    return None if missing or not files else files


def entry_path(code: list, name: str, asked: tuple) -> str:
    env = tuple(os.environ.get(v) for v in HF_VARIABLES)
    key = repr((code, sys.version, os.getcwd(), name, asked, env)).encode()  # (marshal's bytes vary with refcounts)
    return os.path.join(folder(), blake2b(key, digest_size=16).hexdigest())


def content(name: str) -> bytes | None:
    try:
        with open(name, "rb") as fh:
            return blake2b(fh.read(), digest_size=16).digest()
    except OSError:
        return None


def lookup(paths: list[str], asked: tuple) -> tuple[list[Row], int] | None:
    """(findings, files checked) when every file's entry holds; None on any miss."""
    names = python_files(paths)
    if names is None or len(set(names)) != len(names):  # a file given twice: checked (and counted) twice
        return None
    code, rows = code_stamp(), []
    for name in names:
        try:
            with open(entry_path(code, name, asked), "rb") as fh:
                digest, deps, findings = marshal.load(fh)
        except (OSError, ValueError, EOFError, TypeError):
            return None
        if digest != content(name) or any(stamp(kind, p) != s for kind, p, s in deps):
            return None
        rows += [Row(*f) for f in findings]
    return rows, len(names)


def digests(paths: list[str]) -> dict[str, bytes | None]:
    """Each file's digest, taken before the check reads it (a file edited meanwhile then misses next time); none
    when a file is given twice (its findings would be stored twice over)."""
    names = python_files(paths) or []
    return {name: content(name) for name in names} if len(set(names)) == len(names) else {}


def store(
    asked: tuple, before: dict[str, bytes | None], findings: list, deps: dict[str, list[tuple[str, str]]]
) -> None:
    """Write each checked file's entry (never fails the run: a cache that cannot be written is skipped)."""
    code = code_stamp()
    try:
        os.makedirs(folder(), exist_ok=True)
        for name, digest in before.items():
            if name not in deps or digest is None:
                continue
            mine = tuple((f.path, f.line, f.col, f.rule, f.message, f.fix) for f in findings if f.path == name)
            entry = (digest, tuple((kind, p, stamp(kind, p)) for kind, p in deps[name]), mine)
            target = entry_path(code, name, asked)
            tmp = f"{target}.{os.getpid()}.tmp"
            with open(tmp, "wb") as fh:
                fh.write(marshal.dumps(entry))  # type: ignore[arg-type]  # (tuples of str, int, bytes, None)
            os.replace(tmp, target)
    except OSError:
        return
