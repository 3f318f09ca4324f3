"""Errors that reach the user as one line.

`UserError` means the input was wrong (exit code 2); anything else escaping the CLI is a bug (exit 1).
A refused value is named the way the user gave it (`--max-new-tokens 0`, or `field 'max_new_tokens'` of a
file), with what is allowed and the nearest valid value.
"""

from __future__ import annotations

import typing
from collections.abc import Set
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError
    from pydantic_core import ErrorDetails

M = TypeVar("M", bound="BaseModel")


class UserError(Exception):
    """Bad input: a file, a flag, a model that does not exist. The message is shown as is, on one line."""


FLAG_NAMES = {"attn_implementation": "--attn", "cache_implementation": "--kv-cache", "tp_size": "--tp"}


def flag(name: str) -> str:
    """A keyword's CLI spelling: max_new_tokens -> --max-new-tokens (config fields: their flags)."""
    return FLAG_NAMES.get(name, "--" + name.replace("_", "-"))


def shown(value: Any) -> str:
    """A value as the user typed it: numbers with separators, text quoted only when it has spaces."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.6g}" if abs(value) < 1e15 else f"{value:,.0f}"
    text = str(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return repr(text) if (not text or " " in text or "\n" in text) else text


def _num(v: float) -> str:
    if isinstance(v, int):
        return f"{v:,}"
    return f"{int(v):,}" if float(v).is_integer() and abs(v) < 2**53 else f"{v:,.6g}"


def out_of_range(
    label: str,
    value: Any,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    unit: str = "",
    example: Any = None,
    integer: bool = False,
) -> str:
    """'{label} {value}: allowed A to B[ unit]; nearest valid: N' for a value outside its bounds."""
    u = f" {unit}" if unit else ""
    low = f"{_num(ge)}" if ge is not None else (f"more than {_num(gt)}" if gt is not None else None)
    high = f"{_num(le)}" if le is not None else (f"less than {_num(lt)}" if lt is not None else None)
    if low is not None and high is not None:
        allowed = f"{low} to {high}{u}" if ge is not None and le is not None else f"{low}{u}, up to {high}{u}"
    elif low is not None:
        allowed = f"at least {low}{u}" if ge is not None else f"{low}{u}"
    else:
        allowed = f"at most {high}{u}" if le is not None else f"{high}{u}"
    nearest = None  # the closest allowed value, where one exists (an open bound on a real number has none)
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = None
    if v is not None:
        if ge is not None and v < ge:
            nearest = ge
        elif gt is not None and v <= gt and integer:
            nearest = gt + 1
        elif le is not None and v > le:
            nearest = le
        elif lt is not None and v >= lt and integer:
            nearest = lt - 1
    tail = (
        f"; nearest valid: {_num(nearest)}"
        if nearest is not None
        else (f"; for example {_num(example)}" if example is not None else "")
    )
    return f"{label} {shown(value)}: allowed {allowed}{tail}"


def _bounds(model_cls: type[BaseModel] | None, loc: tuple) -> dict[str, Any]:
    """The numeric bounds (ge, gt, le, lt) and extras (unit, example) of the field at `loc`, when it is a
    top-level field of `model_cls` with annotated constraints."""
    fields = getattr(model_cls, "model_fields", {})
    if len(loc) != 1 or loc[0] not in fields:
        return {}
    info = fields[loc[0]]
    out: dict[str, Any] = {}
    for m in info.metadata:
        for key in ("ge", "gt", "le", "lt"):
            if getattr(m, key, None) is not None:
                out[key] = getattr(m, key)
    kinds = typing.get_args(info.annotation) or (info.annotation,)
    out["integer"] = int in kinds and float not in kinds
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    if "unit" in extra:
        out["unit"] = extra["unit"]
    if info.examples:
        out["example"] = info.examples[0]
    return out


def _clean(loc: tuple) -> tuple:
    """A location without pydantic's union-branch tags ('str', 'list[ChatMessage]', 'function-after[...]')."""
    return tuple(
        p
        for p in loc
        if not (isinstance(p, str) and (p in ("str", "int", "float", "bool", "dict", "list") or "[" in p))
    )


def validation_message(
    err: ValidationError, source: str, model_cls: type[BaseModel] | None = None, flags: Set[str] = frozenset()
) -> str:
    """One line for a pydantic ValidationError: the most specific problem (of a union's alternatives, the
    one that went deepest), named as a flag when a flag gave it, with its bounds and nearest valid value."""
    errors = err.errors()
    per_value: dict[tuple, tuple[tuple, ErrorDetails]] = {}
    for e in errors:
        loc = _clean(tuple(e["loc"]))
        key = loc[:2] if len(loc) >= 2 and isinstance(loc[1], int) else loc[:1]
        if key not in per_value or len(loc) > len(per_value[key][0]):
            per_value[key] = (loc, e)
    loc, first = next(iter(per_value.values()))
    more = f" (and {len(per_value) - 1} more)" if len(per_value) > 1 else ""
    name = ".".join(str(p) for p in loc) or "(root)"
    label = flag(name) if len(loc) == 1 and loc[0] in flags else f"field '{name}'"
    prefix = "" if label.startswith("--") else f"{source}: "
    b = _bounds(model_cls, loc)
    if first["type"] in ("greater_than", "greater_than_equal", "less_than", "less_than_equal") and b:
        return prefix + out_of_range(label, first["input"], **b) + more
    msg = first["msg"].removeprefix("Value error, ")
    value = first.get("input")
    said = isinstance(value, (str, int, float)) and (str(value) in msg or repr(value) in msg)
    got = (
        f" (got {shown(value)})"
        if isinstance(value, (str, int, float)) and not said and first["type"] != "missing"
        else ""
    )
    return f"{prefix}{label}: {msg}{got}{more}"


def validated(model_cls: type[M], data: dict[str, Any], source: str, overrides: dict[str, Any]) -> M:
    """`model_cls` from file fields with CLI flags on top (None flags left out); bad input is a UserError."""
    from pydantic import ValidationError

    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return model_cls.model_validate({**data, **given})
    except ValidationError as e:
        raise UserError(validation_message(e, source, model_cls, frozenset(given))) from None
