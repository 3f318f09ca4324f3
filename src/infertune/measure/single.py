"""Single generate: the workload's batches, one `generate` call at a time (warmup calls untimed)."""

from __future__ import annotations

from infertune.core.workload import Workload
from infertune.measure.core import Session


def calls(wl: Workload) -> list[tuple[bool, list[int]]]:
    """(timed, prompt indices) per generate call."""
    batches = wl.batches()
    return [(False, b) for b in (batches * wl.warmup)[: wl.warmup]] + [(True, b) for b in batches * wl.repeats]


def run_call(s: Session, idx: list[int], seqs: list[list[int]], timed: bool) -> float:
    """One call, its requests timed from its start. Returns when it ended."""
    start, end, steps, gen = s.generate(seqs)
    if timed:
        s.record_call(idx, seqs, steps, gen, [start] * len(idx))
    return end
