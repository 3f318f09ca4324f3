"""Which transformers a script targets: `--target-version`, else the pins in a requirements*.txt,
pyproject.toml, setup.py or setup.cfg beside or above it; else unknown (the rules then speak for 4.x and 5.x:
the machine that runs the script is not necessarily the one that checks it)."""

from __future__ import annotations

import os

from infertune.doctor.checkpoint import memo, note
from infertune.doctor.nodes import IGNORECASE, Target, lazy_compile

REQ = lazy_compile(r"""(?<![\w-])transformers\s*(?:\[[^\]]*\])?\s*((?:[<>=!~^]=?\s*[\w.*]+\s*,?\s*)+)""", IGNORECASE)
CLAUSE = lazy_compile(r"([<>=!~^]=?)\s*([\d.*]+)")
NUMBER = lazy_compile(r"\d+(?:\.\d+)*")
POETRY = lazy_compile(r"""(?m)^\s*transformers\s*=\s*["']([^"']+)["']""")  # transformers = "^4.40"
POETRY_TABLE = lazy_compile(r"""(?m)^\s*transformers\s*=\s*\{[^}]*version\s*=\s*["']([^"']+)["']""")
PIN_FILES = ("pyproject.toml", "setup.py", "setup.cfg")
VersionRange = tuple[tuple[int, ...] | None, tuple[int, ...] | None]


def parse_version(text: str) -> tuple[int, ...] | None:
    parts = NUMBER.match(text.strip())
    return tuple(int(p) for p in parts.group(0).split(".")) if parts else None


def _bump(v: tuple[int, ...], at: int) -> tuple[int, ...]:
    """The first version above every `v[:at+1]`-prefixed one: (4, 46) at 1 -> (4, 47)."""
    return (*v[:at], v[at] + 1)


def spec_range(spec: str) -> VersionRange:
    """`>=4.40,<5` -> ((4, 40), (4, 9999)); the upper bound is the highest version allowed, inclusive-ish."""
    lo: tuple[int, ...] | None = None
    hi: tuple[int, ...] | None = None
    for op, text in CLAUSE.findall(spec):
        v = parse_version(text)
        if v is None:
            continue
        if op in ("==", "===") or (op == "=" and "*" not in text):
            if "*" in text:  # ==4.* : any 4.x
                lo, hi = v, (*v, 9999)
            else:
                lo, hi = v, v
        elif op == "~=":  # ~=4.46.0 -> >=4.46.0, ==4.46.*
            lo, hi = v, (*v[:-1], 9999) if len(v) > 1 else None
        elif op == "^":  # poetry caret: below the next major
            lo, hi = v, (v[0], 9999)
        elif op == ">=" or op == ">":
            lo = v
        elif op == "<":
            hi = (v[0] - 1, 9999) if len(v) == 1 or all(x == 0 for x in v[1:]) else (*v[:-1], v[-1] - 1, 9999)
        elif op == "<=":
            hi = v
    return lo, hi


def _specs_in(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return []
    if os.path.basename(path) == "pyproject.toml":  # poetry tables write `transformers = "^4.40"`
        text = POETRY.sub(r"transformers \1", text)
        text = POETRY_TABLE.sub(r"transformers \1", text)
    specs = []
    for line in text.splitlines():
        line = line.split("#", 1)[0] if path.endswith((".txt", ".cfg")) else line
        specs += [m.group(1) for m in REQ.finditer(line)]
    return specs


@memo
def pinned(folder: str) -> tuple[VersionRange, str] | None:
    """The transformers pin in the nearest folder (this one, an absolute path, or above) that has a requirements
    file."""
    for d in _up_from(folder):
        note(d, "pins")  # (a pin file added or removed there is a miss; other files come and go)
        try:
            names = os.listdir(d)
        except OSError:
            names = []
        reqs = sorted(n for n in names if n.startswith("requirements") and n.endswith(".txt"))
        files = [os.path.join(d, n) for n in reqs] + [
            os.path.join(d, n) for n in PIN_FILES if os.path.isfile(os.path.join(d, n))
        ]
        for f in files:
            note(f)
            for spec in _specs_in(f):
                lo, hi = spec_range(spec)
                if lo or hi:
                    return (lo, hi), str(f)
        if files or os.path.exists(
            os.path.join(d, ".git")
        ):  # the project's root: what lies above belongs to something else
            return None  # the repository's root: nothing above belongs to this script
    return None


def _up_from(folder: str) -> list[str]:
    """The folder and every folder above it, as Path(folder).parents would list them."""
    out = [folder]
    while (up := os.path.dirname(out[-1])) != out[-1]:
        out.append(up)
    return out


def target_for(script: str, base: Target, flag: str | None = None) -> Target:
    """A copy of `base` with the transformers versions this script targets."""
    t = base.copy()
    if t.version_source and not flag:
        return t  # the caller already said
    if flag:
        lo, hi = spec_range(flag if CLAUSE.match(flag) else f"=={flag}")
        t.transformers_min, t.transformers_max, t.version_source = lo, hi, "--target-version"
        return t
    pin = pinned(os.path.dirname(os.path.realpath(script)))
    if pin:  # no pin: the script may meet 4.x or 5.x (the machine that runs it is not this one)
        (t.transformers_min, t.transformers_max), t.version_source = pin
    return t
