"""One slow path as data (techniques.slow_paths holds the table): where it applies, its measured factor when one is
published, the moves that cure it, and its public sources. Its own module so that the table can be split by theme
(slow_paths: kernels, placement and versions; slow_paths_stack: the software stack under the model)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from infertune.techniques.base import Facts, Setup
from infertune.techniques.factors import Factor, Phase

Symptom = Literal["decode-speed", "prefill-speed", "memory", "crash", "wrong-output"]
SPEED: tuple[Symptom, ...] = ("decode-speed", "prefill-speed")


@dataclass(frozen=True)
class SlowPath:
    id: str
    what: str
    symptoms: tuple[Symptom, ...]
    where: str  # the conditions, in words (library and versions, GPU, architecture, quantization, placement)
    holds: Callable[[Facts, Setup], bool | None]
    cures: tuple[str, ...]  # technique ids (techniques.REGISTRY) whose move leaves this path
    sources: tuple[str, ...]
    phase: Phase | None = None  # the measured factor, when one is published
    ratio: float | Callable[[Facts, Setup], float] | None = None
    reference: Callable[[Setup], Setup] = lambda s: s  # the setup whose roofline the ratio multiplies
    reference_name: str = "the roofline of this setup"

    def factor(self, f: Facts, s: Setup) -> Factor | None:
        if self.ratio is None or self.phase is None:
            return None
        r = self.ratio(f, s) if callable(self.ratio) else self.ratio
        return Factor(
            id=self.id,
            what=self.what,
            phase=self.phase,
            ratio=round(r, 2),
            applies=lambda f, s: self.holds(f, s) is True,
            reference=self.reference,
            reference_name=self.reference_name,
            sources=self.sources,
        )

    def line(self) -> str:
        return f"known slow path {self.id}: {self.what} (where: {self.where}; {', '.join(self.sources)})"
