"""The verbs that answer from the caches (profile, estimate, advise), and a way in that skips typer.

A model seen before is profiled from its cache, so these verbs take milliseconds; importing typer, rich and
the other verbs' modules took most of their start-up (benchmarks/estimate_startup.py). `main` reads the
command line of these three verbs when it is plain (known flags, each once, well-formed values) and runs
the same function the typer command runs; anything else (`--help`, an unknown flag, a bad value) it leaves
to typer, which answers as it always does. JSON needs neither typer nor rich; tables import rich.
`FLAGS` mirrors the typer commands' options (tests/cli/test_cli_quick.py checks it against them).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Any

from infertune.core.errors import UserError


class Format(str, Enum):
    table = "table"
    json = "json"


def print_json(obj: Any) -> None:
    import json

    data = obj.model_dump(mode="json") if hasattr(obj, "model_dump") else obj
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def say(msg: str) -> None:
    """A progress line on stderr, as `output.say` writes it; off a terminal a plain message (printable, no
    colon, so no rich markup, emoji code or tab to render) is the same line written without importing rich."""
    if not _rich_stderr() and msg.isprintable() and ":" not in msg:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()
        return
    from infertune.cli.output import say as show

    show(msg)


def _rich_stderr() -> bool:
    """Whether rich may treat stderr as a terminal: a tty, or one of the variables that make it act as one."""
    if any(os.environ.get(v) is not None for v in ("TTY_COMPATIBLE", "TTY_INTERACTIVE", "FORCE_COLOR")):
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def reading(what: str = "reading the model") -> Iterator[Callable[[str], None]]:
    """The verb's `say`: a spinner on a terminal (`output.progress`); elsewhere each message is a line on
    stderr, as `progress` writes it there, and rich is imported only if a message comes."""
    if not _rich_stderr():
        yield say
        return
    from infertune.cli.output import err, progress

    with err.status(what, spinner="dots") as status:
        yield progress(status)


# --- the verbs ----------------------------------------------------------------------------------------


def profile(
    fmt: str = "table", model: str | None = None, revision: str | None = None, trust_remote_code: bool = False
) -> None:
    from infertune.models import store
    from infertune.probe.model import profile_model

    path = store.resolve(model or store.DEFAULT_MODEL, revision, say=say)
    p = profile_model(path, trust_remote_code)
    if fmt == "json":
        from infertune.core.schema import SCHEMA_VERSION
        from infertune.models.hub import revision_of

        print_json(
            {
                "kind": "profile",
                "schema_version": SCHEMA_VERSION,
                "model_revision": revision_of(path),
                **p.model_dump(mode="json"),
            }
        )
        return
    from infertune.cli.plan_output import print_profile

    print_profile(path, p)


def estimate(fmt: str = "table", **flags: Any) -> None:
    """`flags`: `infertune.api.estimate`'s arguments, as the command line gave them."""
    from infertune import api

    with reading() as update:
        result = api.estimate(**flags, say=update)
    if fmt == "json":
        print_json(result)
        return
    from infertune.cli.plan_output import print_estimate, print_sweep

    if isinstance(result, api.EstimateSweep):
        print_sweep(result.sweep)
    else:
        print_estimate(result)


def advise(fmt: str = "table", no_input: bool = False, **flags: Any) -> None:
    """`flags`: `infertune.api.advise`'s arguments, as the command line gave them."""
    from infertune import api

    if not no_input and fmt == "table" and sys.stdin.isatty() and sys.stdout.isatty():
        advice = api.advise(**flags, ask=ask_count, say=say)  # questions on the terminal: no spinner over them
    else:
        with reading() as update:
            advice = api.advise(**flags, say=update)
    if fmt == "json":
        print_json(advice)
        return
    from infertune.cli.plan_output import print_advice

    print_advice(advice)


def ask_count(question: str, default: int) -> int:
    """A count on the terminal, read as the flags read it (512, 2k, 32k)."""
    from rich.prompt import Prompt

    from infertune.api import parse_tokens
    from infertune.cli.output import err

    while True:
        text = Prompt.ask(question, default=str(default), console=err)
        try:
            return parse_tokens(text)[0]
        except UserError as e:
            err.print(str(e), highlight=False)


# --- the way in without typer ---------------------------------------------------------------------------

POSITIVE = "int>=1"  # typer.Option(min=1)
COMMON = {"model": str, "revision": str, "trust_remote_code": bool, "fmt": Format}
FLAGS: dict[str, dict[str, Any]] = {  # parameter -> kind: str, int, POSITIVE, bool (a flag), Path, list, Format
    "profile": COMMON,
    "estimate": {
        **COMMON,
        "dtype": str,
        "quantization": str,
        "kv_cache": str,
        "kv_nbits": int,
        "kv_residual_len": int,
        "max_cache_len": str,
        "attn": str,
        "prefill_chunk": str,
        "input_len": str,
        "max_new_tokens": str,
        "batch": int,
        "concurrency": int,
        "gpu": str,
        "gpus": int,
        "max_memory": str,
        "cpu": bool,
    },
    "advise": {
        **COMMON,
        "gpu": str,
        "gpus": int,
        "vram": str,
        "cpu_ram": str,
        "dtype": str,
        "attn": str,
        "quantization": str,
        "kv_cache": str,
        "compile": bool,
        "batching": str,
        "device_map": str,
        "tp": POSITIVE,
        "lib": list,
        "observed": list,
        "oom": str,
        "cpu": str,
        "cpu_flags": str,
        "cores": POSITIVE,
        "input_len": str,
        "max_new_tokens": str,
        "batch": int,
        "concurrency": int,
        "measured": Path,
        "no_input": bool,
    },
}
POSITIONAL = {"advise": "workload"}  # one optional argument (a Path)
RUN: dict[str, Callable[..., object]] = {"profile": profile, "estimate": estimate, "advise": advise}


def flag_name(param: str) -> str:
    return "--format" if param == "fmt" else "--" + param.replace("_", "-")


def _value(kind: Any, text: str) -> Any:
    """The value as typer would convert it; ValueError where typer might answer otherwise."""
    if text.startswith("-") or not text:
        raise ValueError(text)
    if kind is int or kind == POSITIVE:
        n = int(text)
        if kind == POSITIVE and n < 1:
            raise ValueError(text)
        return n
    if kind is Format:
        return Format(text).value
    return Path(text) if kind is Path else text


def parse(verb: str, args: list[str]) -> dict[str, Any] | None:
    """The verb's keyword arguments from a plain command line; None: typer must read it."""
    flags = {flag_name(p): (p, kind) for p, kind in FLAGS[verb].items()}
    found: dict[str, Any] = {}
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if not arg.startswith("--"):
            name = POSITIONAL.get(verb)
            if name is None or name in found or arg.startswith("-") or not arg:
                return None
            found[name] = Path(arg)
            continue
        flag, eq, text = arg.partition("=")
        if flag not in flags:
            return None
        param, kind = flags[flag]
        if param in found and kind is not list:
            return None
        if kind is bool:
            if eq:
                return None
            found[param] = True
            continue
        if not eq:
            if not rest:
                return None
            text = rest.pop(0)
        try:
            value = _value(str if kind is list else kind, text)
        except ValueError:
            return None
        found[param] = [*found.get(param, []), value] if kind is list else value
    return found


def main(verb: str, args: list[str]) -> None:
    """Run `verb` and exit when its command line is plain; return (having done nothing) when it is not."""
    from infertune.cli.exits import guard

    found = parse(verb, args)
    if found is not None:
        from infertune.cli import answers

        kept = answers.entry(verb, found)
        if answers.replay(kept):
            sys.exit(0)
        guard(lambda: answers.keeping(kept, found, RUN[verb]))
