"""The rules' regular expressions, compiled once and kept between runs like bytecode (built-in modules only).

`re.compile` parses a pattern and assembles its program in Python: for the rules' ~30 patterns that was ~9 ms, a
fifth of a fresh check (benchmarks/README.md, "doctor_speed"). The programs are kept in one file beside the
findings cache's folder (`$INFERTUNE_HOME/doctor-patterns-*.marshal`, default `~/.cache/infertune/`), named by
the Python version, the regular-expression engine's magic number and the byte order, with a digest of what it
holds, and handed back to the engine (`_sre.compile`, what `re.compile` itself ends with), which checks each
program before use. Anything unexpected (another Python's layout, a file whose digest does not match, a program
the engine refuses) falls back to `re.compile`. `INFERTUNE_NO_DOCTOR_CACHE=1` turns the store off; `--no-cache`
does not (it is about findings, as bytecode is not).
"""

from __future__ import annotations

import _sre
import marshal
import os
import sys
from _blake2 import blake2b

TYPE_CHECKING = False  # (typing's own: importing typing costs a fresh check ~2 ms; type checkers read it as True)
if TYPE_CHECKING:
    import re

_programs: dict | None = None  # (pattern, flags) -> (flags, code, groups, groupindex, indexgroup)
_added = False


def path() -> str:
    home = os.environ.get("INFERTUNE_HOME")
    base = os.path.expanduser(home) if home else os.path.expanduser("~/.cache/infertune")
    return os.path.join(base, f"doctor-patterns-{sys.hexversion:x}-{_sre.MAGIC}-{sys.byteorder}.marshal")


def _enabled() -> bool:
    return os.environ.get("INFERTUNE_NO_DOCTOR_CACHE") != "1"


def _load() -> dict:
    """The kept programs; {} for a missing file, or one whose digest does not match what it holds (a damaged
    program could still be a valid one that matches something else)."""
    try:
        with open(path(), "rb") as fh:
            digest, payload = marshal.load(fh)
        if blake2b(payload).digest() != digest:
            return {}
        data = marshal.loads(payload)
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
        payload = marshal.dumps(_programs)
        with open(tmp, "wb") as fh:
            marshal.dump((blake2b(payload).digest(), payload), fh)
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
    from array import array

    # the program as bytes of 32-bit words (the engine's SRE_CODE): a file of int lists took 3 ms to read
    code = array("I", _compiler._code(parsed, flags)).tobytes()
    return int(flags | parsed.state.flags), code, parsed.state.groups - 1, groupindex, tuple(indexgroup)


def _re_compile(pattern: str, flags: int) -> re.Pattern[str]:
    import re  # (only here: the store's hits need no `re`, whose import was ~2 ms of a fresh check)

    return re.compile(pattern, flags)


def _engine(pattern: str, program: tuple) -> re.Pattern[str]:
    flags, code, groups, groupindex, indexgroup = program
    return _sre.compile(pattern, flags, memoryview(code).cast("I").tolist(), groups, groupindex, indexgroup)


def compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """`re.compile(pattern, flags)`, from the kept program when there is one."""
    global _programs, _added
    if not _enabled():
        return _re_compile(pattern, flags)
    if _programs is None:
        _programs = _load()
    key = (pattern, int(flags))
    try:
        kept = _programs.get(key)
        if kept is not None:
            return _engine(pattern, kept)
        program = _program(pattern, flags)
        compiled = _engine(pattern, program)
    except Exception:  # another layout, a refused program: the public way
        _programs.pop(key, None)
        return _re_compile(pattern, flags)
    _programs[key] = program
    if not _added:
        import atexit

        atexit.register(_save, path())
        _added = True
    return compiled
