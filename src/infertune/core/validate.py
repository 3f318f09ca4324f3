"""The one validation layer: every verb's inputs (CLI flags, Python API arguments, MCP tool arguments, run
file fields) are checked here, before any work starts, against one table of limits. A refusal is one
UserError line that names the input as the user gave it, what is allowed and the nearest valid value.

The limits are pydantic types, so the same bounds hold on the models themselves (`Workload`, `TuneSpec`)
and on the flags that feed them; `check(**inputs)` validates any verb's keyword arguments at once."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, NoReturn

from pydantic import BaseModel, ConfigDict, Field

from infertune.core.errors import UserError, flag, out_of_range, shown, validated

MAX_TOKENS = 2**24  # 16,777,216: above every model's context today (the longest published is 10M tokens)
MAX_COUNT = 65_536  # requests, prompts per call, requests in flight
MAX_SECONDS = 7 * 24 * 3600  # a week
MAX_SEED = 2**32 - 1  # numpy's and torch's generators both take it

Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]
Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Passes = Annotated[int, Field(ge=1, le=10_000)]
Untimed = Annotated[int, Field(ge=0, le=10_000)]
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
Ranks = Annotated[int, Field(ge=1, le=1024)]


def seconds(example: float) -> Any:
    """A duration in seconds: more than zero, at most a week."""
    return Field(None, gt=0, le=MAX_SECONDS, examples=[example], json_schema_extra={"unit": "s"})


def bounded(ge: int, le: int) -> Any:
    return Field(None, ge=ge, le=le)


class Inputs(BaseModel):
    """Every numeric input a verb takes, by its keyword name, with its bounds. Unknown names are ignored:
    `check` is handed a verb's whole keyword set."""

    model_config = ConfigDict(extra="ignore")

    max_new_tokens: int | None = bounded(1, MAX_TOKENS)
    input_len: int | None = bounded(1, MAX_TOKENS)
    max_cache_len: int | None = bounded(1, MAX_TOKENS)
    prefill_chunk: int | None = bounded(1, MAX_TOKENS)
    kv_residual_len: int | None = bounded(0, MAX_TOKENS)
    batch: int | None = bounded(1, MAX_COUNT)
    concurrency: int | None = bounded(1, MAX_COUNT)
    requests: int | None = bounded(1, MAX_COUNT)
    gpus: int | None = bounded(1, 4096)
    tp: int | None = bounded(1, 1024)
    max_model_len: int | None = bounded(16, MAX_TOKENS)
    repeats: int | None = bounded(1, 10_000)
    warmup: int | None = bounded(0, 10_000)
    seed: int | None = bounded(0, MAX_SEED)
    max_trials: int | None = bounded(1, 1000)
    max_batch_tokens: int | None = bounded(1, MAX_TOKENS)
    cb_max_batch_tokens: int | None = bounded(1, MAX_TOKENS)
    cb_block_size: int | None = bounded(1, MAX_TOKENS)
    cb_num_blocks: int | None = bounded(1, 2**31)
    timeout: float | None = seconds(900)
    trial_timeout: float | None = seconds(900)
    ready_timeout: float | None = seconds(300)
    time_budget: float | None = seconds(600)
    duration: float | None = seconds(60)
    max_ttft: float | None = seconds(2)
    max_tpot: float | None = seconds(0.1)
    min_quality: float | None = Field(None, ge=0, le=1)
    max_nll_delta: float | None = Field(None, ge=0, le=100)
    max_kl: float | None = Field(None, ge=0, le=100)


def check(source: str = "input", **inputs: Any) -> None:
    """Refuse the first out-of-bounds input (None: not given). Named as its flag in the message."""
    validated(Inputs, {}, source, {k: v for k, v in inputs.items() if k in Inputs.model_fields})


def choice(name: str, value: Any, choices: Iterable[Any], what: str = "") -> Any:
    """`value` when it is one of `choices`; else one line with the choices and the nearest one."""
    options = list(choices)
    if value in options:
        return value
    texts = [str(c) for c in options]
    starting = [t for t in texts if str(value) and t.lower().startswith(str(value).lower())]
    if len(starting) > 1:  # the start of several names: answered with them, never picked
        one_of(name, value, {t: t for t in starting}, "option")
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and all(isinstance(c, (int, float)) for c in options)
    ):
        nearest: Any = min(options, key=lambda c: (abs(c - value), -c))
    else:
        close = starting or difflib.get_close_matches(str(value).lower(), texts, n=1, cutoff=0.4)
        nearest = close[0] if close else None
    listed = ", ".join(texts[:-1]) + f" or {texts[-1]}" if len(texts) > 1 else texts[0]
    tail = f"; nearest valid: {nearest}" if nearest is not None else ""
    return _refuse(f"{flag(name)} {shown(value)}: {what + ' ' if what else ''}takes {listed}{tail}")


def one_of(name: str, value: str, candidates: dict[str, Any], kind: str) -> Any:
    """Resolve a name that may be ambiguous: exactly one candidate is taken; several are listed, never
    picked (`candidates`: the matches already found for `value`)."""
    if len(candidates) == 1:
        return next(iter(candidates.values()))
    names = ", ".join(sorted(candidates))
    return _refuse(f"{flag(name)} {shown(value)} names {len(candidates)} {kind}s: {names}; give one of them")


def tokens(text: str | int | None, name: str) -> list[int]:
    """'512', '1k', '8k,32k', '1m' -> token counts (k = 1024, as context lengths are quoted), each within
    1..MAX_TOKENS."""
    if text is None:
        return []
    if isinstance(text, int) and not isinstance(text, bool):
        parts = [(str(text), text)]
    else:
        parts = []
        for part in str(text).split(","):
            part = part.strip().lower()
            mult = {"k": 1024, "m": 1024 * 1024}.get(part[-1:], 1)
            digits = part[:-1] if mult > 1 else part
            try:
                value = int(digits) * mult if digits.isdigit() else float(digits) * mult
            except ValueError:
                _refuse(f"{flag(name)} {shown(part)}: not a token count (use e.g. 512, 4k, 128k)")
            if isinstance(value, float) and (value != value or abs(value) == float("inf") or not value.is_integer()):
                _refuse(f"{flag(name)} {shown(part)}: not a whole number of tokens (use e.g. 512, 4k, 128k)")
            parts.append((part, int(value)))
    if not parts:
        _refuse(f"{flag(name)}: give a token count (e.g. 512, 4k, 128k)")
    lo = 0 if name == "kv_residual_len" else 1
    for part, value in parts:
        if not lo <= value <= MAX_TOKENS:
            label = f"{flag(name)} {part}" + (f" ({value:,} tokens)" if str(value) != part else "")
            _refuse(
                out_of_range(label, value, ge=lo, le=MAX_TOKENS, unit="tokens").replace(
                    f"{label} {shown(value)}:", f"{label}:"
                )
            )
    return [v for _, v in parts]


def url(text: str, name: str = "url") -> str:
    """An http(s) URL with a host (a server to send requests to); else one line with an example."""
    from urllib.parse import urlparse

    try:
        parsed = urlparse(text)
        ok = parsed.scheme in ("http", "https") and bool(parsed.netloc) and bool(parsed.hostname)
        _ = parsed.port  # reading it refuses a port that is not a number from 0 to 65535
    except (ValueError, TypeError, AttributeError):
        ok = False
    if not ok:
        _refuse(f"{flag(name)}: not an http(s) URL: {text!r} (e.g. http://127.0.0.1:8000)")
    return text


def levels(value: str | int | list[int], name: str = "concurrency") -> list[int]:
    """'1,4,16' (or one count, or a list) -> requests in flight per level, each within `check`'s bounds."""
    if isinstance(value, str):
        try:
            counts = [int(x) for x in value.split(",") if x.strip()]
        except ValueError:
            _refuse(f"{flag(name)}: not a list of integers: {value!r} (e.g. 1,4,16,64)")
    else:
        counts = [value] if isinstance(value, int) else list(value)
    if not counts:
        _refuse(f"{flag(name)}: give positive integers, e.g. 1,4,16")
    for n in counts:
        check("input", **{name: n})
    return counts


def rates(value: str | float | list[float], name: str = "rate") -> list[float]:
    """'0.5,1,2' (or one rate, or a list) -> offered request rates per second, each above 0, up to 1e6."""
    try:
        if isinstance(value, str):
            given = [float(x) for x in value.split(",") if x.strip()]
        else:
            given = [float(value)] if isinstance(value, (int, float)) else [float(x) for x in value]
    except (TypeError, ValueError):
        _refuse(f"{flag(name)}: not a list of numbers: {value!r} (e.g. 0.5,1,2)")
    if not given or not all(0 < r <= 1e6 for r in given):
        text = value if isinstance(value, str) else ",".join(shown(r) for r in given)
        _refuse(f"{flag(name)} {text}: give request rates above 0, up to 1,000,000 per second, e.g. 0.5,1,2")
    return given


# --observed KEY=VALUE: what the user saw, as people write it. Times need a unit (a bare 220 could be ms or s);
# tokens_per_s may be bare; a size's G/GB/GiB read as GiB/GB/GiB (G as torch and htop print it: GiB).
OBSERVED_KEYS = ("tpot", "ttft", "e2e", "tokens_per_s", "peak")
OOM_PHASES = ("load", "prefill", "decode", "host-ram")
_TIME_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0}
_TIME_UNITS |= {"seconds": 1.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0, "h": 3600.0}
_RATE_UNITS = ("", "tok/s", "tokens/s", "token/s", "t/s", "/s", "tps", "tokens/sec", "tok/sec")
_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_SIZE_UNITS |= {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_EXAMPLES = "tpot=220ms, ttft=1.5s, e2e=12s, tokens_per_s=18, peak=23GiB"


def _number_and_unit(text: str) -> tuple[float, str] | None:
    import re

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(\S*)\s*", text.lower())
    return (float(m.group(1)), m.group(2)) if m else None


def observed_value(key: str, value: Any, name: str = "observed") -> float:
    """One observation in the house's units (seconds, tokens/s, bytes): '220ms' -> 0.22, '23GiB' -> 23 * 2**30."""
    if isinstance(value, bool):
        _refuse(f"{flag(name)} {key}={value}: not a number ({_EXAMPLES})")
    if isinstance(value, (int, float)):
        if key in ("tpot", "ttft", "e2e"):
            _refuse(f"{flag(name)} {key}={value}: say the unit, e.g. {key}=220ms or {key}=0.22s")
        got: tuple[float, str] | None = (float(value), "")
    else:
        got = _number_and_unit(str(value))
    mult: float | None = None
    if got is not None:
        unit = got[1]
        if key in ("tpot", "ttft", "e2e"):
            if unit == "":
                _refuse(f"{flag(name)} {key}={value}: say the unit, e.g. {key}=220ms or {key}=0.22s")
            mult = _TIME_UNITS.get(unit)
        elif key == "tokens_per_s":
            mult = 1.0 if unit in _RATE_UNITS else None
        else:
            mult = _SIZE_UNITS.get(unit)
    if got is None or mult is None:
        _refuse(f"{flag(name)} {key}={value}: cannot read it ({_EXAMPLES})")
    out = got[0] * mult
    if not 0 < out < 1e18:
        _refuse(f"{flag(name)} {key}={value}: must be above zero ({_EXAMPLES})")
    return out


def observations(given: Iterable[str] | Mapping[str, Any] | None, name: str = "observed") -> dict[str, Any]:
    """--observed KEY=VALUE (repeatable) or a mapping -> {key: value in seconds, tokens/s or bytes}; an `oom`
    key (a run file's observed: section may hold it) passes through as its phase. One line for anything else."""
    if not given:
        return {}
    if isinstance(given, Mapping):
        pairs = [(str(k), v) for k, v in given.items()]
    elif isinstance(given, str):
        _refuse(f"{flag(name)}: give KEY=VALUE items as a list ({_EXAMPLES})")
    else:
        pairs = []
        for item in given:
            key, sep, value = str(item).partition("=")
            if not sep or not value.strip():
                _refuse(f"{flag(name)} {item!r}: expected KEY=VALUE with a key among {', '.join(OBSERVED_KEYS)}")
            pairs.append((key, value.strip()))
    out: dict[str, Any] = {}
    for key, value in pairs:
        key = key.strip().lower().replace("-", "_")
        if key == "oom":
            out["oom"] = choice("oom", str(value).strip().lower(), OOM_PHASES, "the phase that ran out of memory")
            continue
        if key not in OBSERVED_KEYS:
            _refuse(f"{flag(name)}: unknown key {key!r}; keys: {', '.join(OBSERVED_KEYS)} ({_EXAMPLES})")
        if key in out:
            _refuse(f"{flag(name)}: {key} given twice")
        out[key] = observed_value(key, value, name)
    return out


def _refuse(message: str) -> NoReturn:
    raise UserError(message)
