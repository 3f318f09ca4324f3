"""The rules' regular expressions, compiled once and kept between runs like bytecode (built-in modules only).

`re.compile` parses a pattern and assembles its program in Python: for the rules' ~30 patterns that was ~11 ms, a
third of a fresh check (benchmarks/README.md, "doctor_speed"). The programs are kept in one file beside the
findings cache's folder (`$INFERTUNE_HOME/doctor-patterns-*.marshal`, default `~/.cache/infertune/`), named by
the Python version and the regular-expression engine's magic number, and handed back to the engine (`_sre.compile`, what
`re.compile` itself ends with), which checks each program before use. Anything unexpected (another Python's
layout, a damaged file, a program the engine refuses) falls back to `re.compile`. `INFERTUNE_NO_DOCTOR_CACHE=1`
turns the store off; `--no-cache` does not (it is about findings, as bytecode is not).
"""

from __future__ import annotations

import _sre
import marshal
import os
import re
import sys

_programs: dict | None = None  # (pattern, flags) -> (flags, code, groups, groupindex, indexgroup)
_added = False


def path() -> str:
    home = os.environ.get("INFERTUNE_HOME")
    base = os.path.expanduser(home) if home else os.path.expanduser("~/.cache/infertune")
    return os.path.join(base, f"doctor-patterns-{sys.hexversion:x}-{_sre.MAGIC}.marshal")


def _enabled() -> bool:
    return os.environ.get("INFERTUNE_NO_DOCTOR_CACHE") != "1"


def _load() -> dict:
    try:
        with open(path(), "rb") as fh:
            data = marshal.load(fh)
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(target: str | None = None) -> None:
    """Write the programs (at exit, to the folder of the run that compiled them)."""
    if not _programs:
        return
    target = target or path()
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = f"{target}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            marshal.dump(_programs, fh)
        os.replace(tmp, target)
    except (OSError, ValueError):
        pass  # a read-only home: the next run compiles again


def _program(pattern: str, flags: int) -> tuple:
    """What `re._compiler.compile` hands the engine for this pattern."""
    from re import _compiler, _parser  # type: ignore[attr-defined]  # (the internals re.compile runs)

    parsed = _parser.parse(pattern, flags)
    groupindex = dict(parsed.state.groupdict)
    indexgroup: list[str | None] = [None] * parsed.state.groups
    for name, i in groupindex.items():
        indexgroup[i] = name
    code = [int(c) for c in _compiler._code(parsed, flags)]  # (plain ints: the opcodes are an int subclass)
    return int(flags | parsed.state.flags), code, parsed.state.groups - 1, groupindex, tuple(indexgroup)


def compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """`re.compile(pattern, flags)`, from the kept program when there is one."""
    global _programs, _added
    if not _enabled():
        return re.compile(pattern, flags)
    if _programs is None:
        _programs = _load()
    key = (pattern, int(flags))
    try:
        kept = _programs.get(key)
        if kept is not None:
            return _sre.compile(pattern, *kept)
        program = _program(pattern, flags)
        compiled = _sre.compile(pattern, *program)
    except Exception:  # another layout, a refused program: the public way
        _programs.pop(key, None)
        return re.compile(pattern, flags)
    _programs[key] = program
    if not _added:
        import atexit

        atexit.register(_save, path())
        _added = True
    return compiled
