"""Numbers and settings written for people: MiB/GiB, ms/s, thousands separators, percentages, and
settings as `name value` pairs. Never a repr, never scientific notation, never a dict in running text."""

from __future__ import annotations

from typing import Any

KiB, MiB, GiB = 2**10, 2**20, 2**30


def size(n: float | None) -> str:
    """Bytes in the unit a person reads: 812 MiB, 1.25 GiB, 36 KiB."""
    if n is None:
        return "-"
    a = abs(n)
    if a >= GiB:
        return f"{n / GiB:,.2f} GiB"
    if a >= MiB:
        return f"{n / MiB:,.0f} MiB"
    if a >= KiB:
        return f"{n / KiB:,.0f} KiB"
    return f"{n:,.0f} B"


def duration(s: float | None) -> str:
    """Seconds as 0.42 ms, 38.5 ms, 850 ms, 1.24 s, 12.3 s, 1,203 s."""
    if s is None:
        return "-"
    a = abs(s)
    if a < 0.01:
        return f"{s * 1e3:.2f} ms"
    if a < 0.1:
        return f"{s * 1e3:.1f} ms"
    if a < 1:
        return f"{s * 1e3:.0f} ms"
    if a < 100:
        return f"{s:.2f} s" if a < 10 else f"{s:.1f} s"
    return f"{s:,.0f} s"


def rate(v: float | None, unit: str = "tokens/s") -> str:
    if v is None:
        return "-"
    return f"{v:,.0f} {unit}" if abs(v) >= 100 else f"{v:,.1f} {unit}" if abs(v) >= 1 else f"{v:.2f} {unit}"


def count(v: float | None) -> str:
    """An integer with thousands separators (a float is rounded)."""
    return "-" if v is None else f"{round(v):,}"


def share(v: float | None) -> str:
    """A share in [0, 1] as a percentage: 100 %, 75 %, 0.5 %."""
    if v is None:
        return "-"
    return f"{v:.0%}" if v == 0 or abs(v) >= 0.1 else f"{v:.1%}"


def change(rel: float | None) -> str:
    """A relative change, signed: -34 %, +2.1 %."""
    if rel is None:
        return "-"
    return f"{rel:+.0%}" if abs(rel) >= 0.1 else f"{rel:+.1%}"


def number(v: Any) -> str:
    """Any scalar, readable: ints with separators, floats to 3 significant figures (no exponent)."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) < 0.001:
            return "< 0.001" if v > 0 else "> -0.001"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        digits = max(0, 2 - int(f"{abs(v):e}".split("e")[1]))
        return f"{v:.{min(digits, 6)}f}"
    return str(v)


def value(v: Any) -> str:
    """A setting's value in running text: scalars as `number`, lists joined, mappings as `k v` pairs."""
    if isinstance(v, dict):
        return ", ".join(f"{k} {value(x)}" for k, x in v.items()) or "none"
    if isinstance(v, (list, tuple)):
        return ", ".join(value(x) for x in v) or "none"
    return number(v)


def settings(d: dict[str, Any] | None) -> str:
    """A change or a setup as text: {'dtype': 'bfloat16', 'attn': 'sdpa'} -> 'dtype bfloat16, attn sdpa'."""
    return value(d or {})


OBJECTIVE = {
    "latency": "end-to-end latency",
    "memory": "peak memory above the baseline process",
    "throughput": "throughput",
}


def objective(name: str, v: float | None) -> str:
    """The objective's value in its own unit."""
    if name == "memory":
        return size(v)
    if name == "latency":
        return duration(v)
    return rate(v)
