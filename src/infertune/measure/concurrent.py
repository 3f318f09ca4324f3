"""Concurrent requests in rounds of `concurrency` (prompts cycled), arriving together or as a Poisson
process: `serial` runs one generate per request in arrival order (the rest wait), `static` one padded
batch once the round's last request has arrived. Each request is timed from its arrival."""

from __future__ import annotations

import time

from infertune.core.errors import UserError
from infertune.core.workload import Workload
from infertune.measure.core import Session


def rounds(wl: Workload, batching: str, prompts: int) -> list[tuple[bool, list[int]]]:
    """(timed, prompt indices) per round."""
    if wl.arrival == "poisson" and batching == "continuous":
        raise UserError(
            "poisson arrivals need requests submitted over time: in-process generate_batch takes "
            "them all at once; use serve-trial or loadtest against a continuous-batching server"
        )
    burst = [k % prompts for k in range(wl.concurrency * wl.batch)]
    return [(False, burst)] * wl.warmup + [(True, burst)] * wl.repeats


def wait_until(t: float) -> None:
    delay = t - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


def run_round(
    s: Session, idx: list[int], seqs: list[list[int]], arrive: list[float], timed: bool, batching: str
) -> float:
    """One round under `serial` or `static` batching. Returns when its last call ended."""
    if batching == "static":  # one padded batch once the round's last request has arrived
        wait_until(arrive[-1])
        _, end, steps, gen = s.generate(seqs)
        if timed:
            s.record_call(idx, seqs, steps, gen, arrive)
        return end
    for j, i in enumerate(idx):  # serial: one generate per request, in arrival order: the rest wait
        wait_until(arrive[j])
        _, end, steps, gen = s.generate([seqs[j]])
        if timed:
            s.record_call([i], [seqs[j]], steps, gen, [arrive[j]])
    return end
