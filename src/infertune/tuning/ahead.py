"""The next candidates of a step measured ahead, side by side, where the executor has several lanes (a Ray
cluster's devices: measure/cluster.py's RayExecutor.lanes).

The loop stays one change at a time: step i measures pool[0] against the incumbent. Meanwhile each free lane
measures one of pool[1:] against the same incumbent, in interleaved pairs of its own (its own incumbent trials,
on its own device), as the step it would be if every candidate before it is rejected: then its incumbent is
this one, its index is the next, and the loop takes it as it is. A kept candidate changes the incumbent: the
steps measured ahead of it are dropped (their trials were spent for nothing). The same verdicts and files as
one after another; the time of several steps in one.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from infertune.advisor.moves import Candidate
from infertune.tuning.run import Step

Measure = Callable[[int, Candidate, Step, "float | None"], Step]  # (index, move, incumbent, floor) -> the step


class Ahead:
    def __init__(self, executor: Any, measure: Measure) -> None:
        lanes = getattr(executor, "lanes", None)
        self.lanes: list[dict[str, Any]] = lanes() if lanes is not None else []
        self.executor = executor
        self.measure = measure
        self.running: dict[tuple[int, str, int, float | None], Future] = {}
        self.threads = ThreadPoolExecutor(len(self.lanes) - 1) if len(self.lanes) > 1 else None

    def start(self, index: int, rest: list[Candidate], best: Step, floor: float | None) -> None:
        """rest[j] measured as step index + 1 + j against `best`, each on a lane of its own (not the lane the
        step `index` runs on)."""
        if self.threads is None:
            return
        mine = (self.executor.pinned or {}).get("device")
        free = [lane for lane in self.lanes if not mine or lane.get("device") != mine][: len(self.lanes) - 1]
        for j, (move, lane) in enumerate(zip(rest, free, strict=False)):
            key = (index + 1 + j, move.technique, best.index, floor)
            self.running[key] = self.threads.submit(self._one, lane, index + 1 + j, move, best, floor)

    def _one(self, lane: dict[str, Any], index: int, move: Candidate, best: Step, floor: float | None) -> Step:
        self.executor.pin(lane)  # this thread's trials: on this lane
        return self.measure(index, move, best, floor)

    def settle(self) -> None:
        """Wait for every step measured ahead: none may still write its trials' files when its index is reused.
        Ctrl-C while waiting cancels what runs on the cluster, as it does while a trial runs."""
        try:
            for f in self.running.values():
                f.exception()
        except KeyboardInterrupt:
            cancel = getattr(self.executor, "cancel", None)
            if cancel is not None:
                cancel()
            raise

    def take(
        self, index: int, move: Candidate, best: Step, floor: float | None, remeasured: bool = False
    ) -> Step | None:
        """The step measured ahead for this index, move, incumbent and noise floor; None (and the others
        dropped) when there is none: the incumbent changed, or the floor was measured again (`remeasured`)."""
        f = None if remeasured else self.running.pop((index, move.technique, best.index, floor), None)
        if f is None:
            self.drop()
            return None
        return f.result()

    def drop(self) -> None:
        self.settle()
        self.running.clear()

    def close(self) -> None:
        if self.threads is not None:
            self.threads.shutdown(wait=True, cancel_futures=True)
