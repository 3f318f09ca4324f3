"""What every API verb shares: the callback types and the parsing of the CLI's text flags."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infertune.core import validate
from infertune.core.errors import UserError

Say = Callable[[str], None]
OnEvent = Callable[[dict[str, Any]], None]


def quiet(_msg: str) -> None:
    """The default `say`: progress goes nowhere."""


# --- shared parsing -----------------------------------------------------------------------------------


def parse_tokens(text: str | int, name: str = "input_len") -> list[int]:
    """'512', '1k', '8k,32k', '1m' -> token counts (k = 1024, as context lengths are quoted), in range."""
    return validate.tokens(text, name)


def input_lengths(value: str | int | list[int] | None) -> dict[str, Any]:
    """input_len: one length for every prompt, or a list of mixed lengths (workload `input_lens`)."""
    if value is None:
        return {}
    if isinstance(value, list):
        return {"input_lens": value}
    lengths = parse_tokens(value)
    return {"input_len": lengths[0]} if len(lengths) == 1 and "," not in str(value) else {"input_lens": lengths}


def parse_budgets(text: str) -> dict[str, str]:
    """--max-memory '0=20GiB,cpu=64GiB' -> from_pretrained's max_memory ({'0': '20GiB', 'cpu': '64GiB'})."""
    from infertune.estimate.placement import parse_max_memory

    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, size = (x.strip() for x in part.partition("="))
        if not sep or not size:
            raise UserError(f"--max-memory: {part!r} is not DEVICE=SIZE (e.g. 0=20GiB,cpu=64GiB)")
        budget = parse_max_memory({key: size})  # the estimator's reading: a known device, a size
        assert budget is not None  # a non-empty mapping always reads as one
        ((device, n),) = budget.items()
        if n <= 0:
            raise UserError("--max-memory: the size must be positive")
        out[device.removeprefix("cuda:")] = size
    if not out:
        raise UserError("--max-memory: give DEVICE=SIZE pairs, e.g. 0=20GiB,cpu=64GiB")
    return out


def parse_size_flag(text: str | int | None, flag: str) -> int | None:
    if text is None or isinstance(text, int):
        return text
    from infertune.advisor.intake import parse_size

    return int(text) if text.strip().isdigit() else parse_size(text, flag)


def default_run_dir(prefix: str) -> Path:
    return Path("infertune-runs") / datetime.datetime.now().strftime(f"{prefix}-%Y%m%d-%H%M%S")
