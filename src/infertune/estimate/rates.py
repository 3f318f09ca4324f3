"""This host's measured rates: the `Calibration` record (estimate/calibration.py measures it and keeps it) and
how a figure is read from it, interpolated between the shapes the microbenchmarks (estimate/microbench.py) time.

It sits below the expected model, which reads it, and below the calibration, which runs that model
(estimate/anchor.py) before it keeps the record.
"""

from __future__ import annotations

import itertools
import math
from typing import Literal

from pydantic import BaseModel, Field

LARGE_MATRIX = 2048 * 2048  # weight elements of the matrices `linear_s_per_elem` is timed on
SMALL_MATRIX = 640 * 640  # ... and `linear_small_s_per_elem`: a small model's Linears (SmolLM2: 110k to 885k)
ATTN_HEADS, ATTN_ROWS, PREFILL_LEN = 8, 4, 1024  # measure_attention's heads, sequences and prefill length
EAGER_SCORES_BYTES = ATTN_HEADS * PREFILL_LEN**2 * 4  # one sequence's fp32 scores in its eager prefill

CAL_VERSION = 5


class Calibration(BaseModel):
    kind: Literal["calibration"] = "calibration"
    version: int = CAL_VERSION
    device: str = Field(description="'cpu' or the GPU's name")
    host_key: str = Field(description="CPU model, threads, torch version: a change re-calibrates")
    measured_at: float
    load_per_core: float | None = Field(None, description="1-minute load average / cores while measuring")
    copy_Bps: float = Field(description="large copy, read + write bytes per second")
    linear_s_per_elem: dict[str, dict[int, float]] = Field(
        description="dtype -> activation rows -> seconds per weight element of F.linear, weights from memory "
        "(2048 x 2048 matrices)"
    )
    linear_small_s_per_elem: dict[str, dict[int, float]] = Field(
        default_factory=dict, description="the same for 640 x 640 matrices: small Linears pay more per element"
    )
    step_s: dict[str, float] = Field(description="attention implementation -> fixed seconds per generate step")
    layer_s: dict[str, float] = Field(description="attention implementation -> seconds per decoder layer per step")
    attn_flops_per_s: dict[str, dict[str, dict[str, float]]] = Field(
        default_factory=dict,
        description="'decode' | 'prefill' -> attention implementation -> dtype -> FLOP/s of "
        "attention as transformers runs it (see attention_flops)",
    )
    in_model_x: dict[str, dict[str, dict[str, float]]] = Field(
        default_factory=dict,
        description="'prefill' | 'decode' -> attention implementation -> dtype -> measured / "
        "expected of a reference model's non-attention time on this host (estimate/anchor.py)",
    )
    cpu_flags: list[str] = Field(default_factory=list)

    def in_model(self, phase: str, attn: str, dtype: str) -> float:
        """The in-model factor for this phase, implementation and dtype (1: not measured)."""
        return self.in_model_x.get(phase, {}).get(attn, {}).get(dtype, 1.0)

    def attn_rate(self, phase: str, attn: str, dtype: str) -> float | None:
        """The measured attention FLOP/s for this phase, implementation and dtype (None: not measured)."""
        return self.attn_flops_per_s.get(phase, {}).get(attn, {}).get(dtype)

    def eager_prefill_rate(self, dtype: str, score_bytes: float) -> float | None:
        """Eager prefill attention FLOP/s for a score matrix (all sequences and heads of one layer, fp32) of
        `score_bytes`: log-interpolated between the one- and the 4-sequence calibration (clamped to them)."""
        many, one = self.attn_rate("prefill", "eager", dtype), self.attn_rate("prefill_one", "eager", dtype)
        if not many or not one:
            return many
        lo, hi = EAGER_SCORES_BYTES, ATTN_ROWS * EAGER_SCORES_BYTES
        f = min(max(math.log(max(score_bytes, 1.0) / lo) / math.log(hi / lo), 0.0), 1.0)
        return math.exp(math.log(one) + f * (math.log(many) - math.log(one)))

    def linear_s(self, dtype: str, rows: int, elems: float, matrix: float | None = None) -> float:
        """Seconds for `elems` weight elements times `rows` activations, in matrices of `matrix` elements each
        (None: large ones). Log-interpolated between the measured row counts (linear in rows beyond the largest:
        compute-bound) and, with `matrix`, between the small and the large matrices' rates (clamped to them)."""
        large = _per_elem(self.linear_s_per_elem.get(dtype) or self.linear_s_per_elem["float32"], rows)
        small_table = self.linear_small_s_per_elem.get(dtype)
        if matrix is None or not small_table or matrix >= LARGE_MATRIX:
            return elems * large
        small = _per_elem(small_table, rows)
        f = max(math.log(matrix / SMALL_MATRIX), 0.0) / math.log(LARGE_MATRIX / SMALL_MATRIX)
        return elems * math.exp(math.log(small) + f * (math.log(large) - math.log(small)))


def _per_elem(table: dict, rows: int) -> float:
    """Seconds per weight element at `rows` activations from a {rows: seconds} table (see Calibration.linear_s)."""
    pts = sorted((int(k), v) for k, v in table.items())
    if rows <= pts[0][0]:
        return pts[0][1]
    if rows >= pts[-1][0]:
        return pts[-1][1] * rows / pts[-1][0]
    for (r0, v0), (r1, v1) in itertools.pairwise(pts):
        if r0 <= rows <= r1:
            f = (math.log(rows) - math.log(r0)) / (math.log(r1) - math.log(r0))
            return math.exp(math.log(v0) + f * (math.log(v1) - math.log(v0)))
    return pts[-1][1]  # pragma: no cover
