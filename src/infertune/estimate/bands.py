"""The expected speed's own error: the band its validation measured for this kind of row (`data/speed_bands.toml`).

`benchmarks/speed_bands.py` runs the published GPU rows (dev part of published-gpu-2 plus the old table) through
the estimate and writes, per kind (device class / phase / regime), the 10th-90th percentile of measured/expected
time and the row count. A kind with no validation rows (every CPU kind, for now) gets no band: outputs say so.
"""

from __future__ import annotations

import sys
from functools import cache
from importlib import resources

from pydantic import BaseModel, Field

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

LONG_PROMPT = 16384  # decode after a prompt this long is its own kind


class Band(BaseModel):
    kind: str = Field(description="device class / phase / regime of the rows it was measured on")
    low: float = Field(description="10th percentile of measured/expected time on those rows")
    high: float = Field(description="90th percentile of measured/expected time on those rows")
    rows: int = Field(description="validation rows of this kind")
    source: str = Field(description="corpus, commit and date the band was measured on")


def kind_of(platform: str, phase: str, quantized: bool, moe: bool, input_len: int) -> str:
    """A handful of kinds: device class (gpu/cpu), phase (ttft/decode), regime (moe, quantized, long, dense)."""
    device = "gpu" if platform == "cuda" else "cpu"
    if moe:
        regime = "moe"
    elif quantized:
        regime = "quantized"
    elif phase == "decode" and input_len >= LONG_PROMPT:  # prefill at long prompts holds: one kind
        regime = "long"
    else:
        regime = "dense"
    return f"{device}/{phase}/{regime}"


@cache
def _table() -> dict:
    return tomllib.loads(resources.files("infertune").joinpath("data/speed_bands.toml").read_text(encoding="utf-8"))


def band(kind: str) -> Band | None:
    """The measured band of a kind, None where the validation had no rows of it."""
    t = _table()
    row = t.get("kind", {}).get(kind)
    if row is None:
        return None
    source = f"{t['corpus']}, commit {t['commit']}, {t['date']}"
    return Band(kind=kind, low=row["low"], high=row["high"], rows=row["rows"], source=source)


def describe(b: Band | None, kind: str) -> str:
    """'validated 0.90-1.29x on 35 published rows of this kind' or 'no validation rows'."""
    if b is None:
        return f"no validation rows of this kind ({kind})"
    return f"validated {b.low:.2f}-{b.high:.2f}x on {b.rows} published rows of this kind ({kind})"
