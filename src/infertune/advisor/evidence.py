"""What says a phase is slow beyond the estimate, for the advisor's ranking: the speeds the user saw as findings
(with their candidate causes, the known slow paths of the setup), whether a known problem of an unstated version
counts, and whether a move's gain the estimate cannot show is worth proposing."""

from __future__ import annotations

from infertune.advisor.diagnose import Finding, Severity, worst_device
from infertune.advisor.moves import GAP, MEMORY, REAL_GAIN, Candidate, Gap, relief
from infertune.estimate import Estimate
from infertune.techniques import Facts, Setup, slow_paths
from infertune.techniques.upgrade import KnownProblem, Upgrade

SEVERITY: tuple[Severity, ...] = ("blocking", "major", "minor")  # the gravest first


def with_observed(f: Facts, current: Setup, ranked: list[Finding], gaps: list[Gap]) -> list[Finding]:
    """The findings with the speeds the user saw: a major finding where far beyond the expected (minor within
    the speed model's error), each with its candidate causes (the known slow paths of this setup with that
    symptom). The user ran it: an observed speed comes before every estimated memory finding, and an estimated
    blocking memory finding is no longer blocking (it loaded); only an out-of-memory they saw keeps memory
    first."""
    if not gaps:
        return ranked
    oom = f.observed is not None and f.observed.oom is not None
    out = list(ranked)
    observed: list[Finding] = []
    for g in gaps:
        if any(x.category == g.category for x in observed):
            continue  # the largest gap of a category speaks for it
        causes = [p for p in slow_paths.matching(f, current, maybe=g.beyond) if g.category in p.symptoms]
        unknown = "no known slow path matches this setup: measure it (infertune measure) to see where the time goes"
        lines = [g.line] + ([f"candidate cause: {p.line()}" for p in causes] or ([unknown] if g.beyond else []))
        if g.category == "concurrency":
            lines = [g.line]  # queueing: the estimate's own concurrency evidence says why
        severity: Severity = "major" if g.beyond else "minor"
        old = next((x for x in out if x.category == g.category), None)
        if old is not None:
            out.remove(old)
            lines += [e for e in old.evidence if e not in lines]
            severity = min(severity, old.severity, key=SEVERITY.index)  # the estimate's, where it is graver
        observed.append(Finding(category=g.category, severity=severity, evidence=lines))
    if oom:
        return [x for x in out if x.severity == "blocking"] + observed + [x for x in out if x.severity != "blocking"]
    ran = "the user ran this setup (an observed speed, no out-of-memory): the weights loaded, whatever the estimate"
    out = [
        x.model_copy(update={"severity": "major", "evidence": [ran, *x.evidence]})
        if x.severity == "blocking" and x.category == "load-memory"
        else x
        for x in out
    ]
    # severity for severity, what the user saw first; an estimated memory item never above an observed speed
    worst_seen = min(SEVERITY.index(x.severity) for x in observed)

    seen = {id(x) for x in observed}

    def key(x: Finding) -> tuple[int, bool]:
        sev = SEVERITY.index(x.severity)
        if id(x) not in seen and x.category in MEMORY:
            sev = max(sev, worst_seen)
        return sev, id(x) not in seen

    return sorted(observed + out, key=key)


def unstated_unseen(f: Facts, current: Setup, c: Candidate, beyond: set[str], base: Estimate) -> bool:
    """An upgrade past a known problem of a library version nobody stated, without the evidence that would make
    it the cause: a speed problem needs an observed speed beyond GAP of the expected (within the speed model's
    error the problem would crowd out what the estimate finds), a memory problem an observed out-of-memory that
    the estimate does not already explain and that the problem's own size could cause (`plausible`)."""
    if c.technique != "upgrade":
        return False
    p = Upgrade().fixes(current, c.setup)
    if p is None or p.affects(f, current) is not None:
        return False
    oom = f.observed.oom if f.observed is not None else None
    speed = bool(set(p.addresses) & beyond & {"decode-speed", "prefill-speed"}) and slows(f, current, p, base)
    # an out-of-memory is evidence for a problem of the phase it happened in: one that shows while generating
    # (a logits copy, a growing cache) cannot be why the model ran out of memory while loading
    memory = oom is not None and bool(set(p.addresses) & OOM_CATEGORIES[oom]) and plausible(f, current, p, base)
    return not (speed or memory)


def plausible(f: Facts, current: Setup, p: KnownProblem, base: Estimate) -> bool:
    """Could this problem be why the user ran out of memory? Not where the estimate already says the setup does not
    fit (the weights or the workload's state are why, and the moves that make it fit come first), nor where its own
    size, priced from its source, is far below the room the estimate leaves (a 20 MB mask buffer does not fill
    9 GiB). Unpriced problems stay plausible."""
    worst = worst_device(base)
    if worst is None:
        return True
    if not worst.fits:
        return False
    if p.extra_bytes is None:
        return True
    return p.extra_bytes(f, current) >= PLAUSIBLE_SHARE * worst.headroom_bytes


def slows(f: Facts, current: Setup, p: KnownProblem, base: Estimate) -> bool:
    """Could this problem be why a step runs beyond GAP of the expected? A problem priced in bytes (a mask built at
    every forward) slows a step by at most the share those bytes add to what the step reads anyway (the weights):
    a 32 MB mask beside 13 GB of weights does not double a step. Unpriced problems stay candidates."""
    if p.extra_bytes is None or not base.memory.weights_bytes:
        return True
    return 1 + p.extra_bytes(f, current) / base.memory.weights_bytes >= GAP


# a problem adding less than half the room the estimate leaves is not why memory ran out, unless the estimate is off
# by more than that room (its memory rows: benchmarks/estimate_accuracy.py, published_gpu.py)
PLAUSIBLE_SHARE = 0.5


OOM_CATEGORIES: dict[str, set[str]] = {
    "load": {"load-memory"},
    "host-ram": {"load-memory"},
    "prefill": {"load-memory", "kv-cache-growth", "long-input-attention"},
    "decode": {"load-memory", "kv-cache-growth", "long-input-attention"},
}


def evidenced(c: Candidate, category: str, severity: str, seen: set[str]) -> bool:
    """A move whose gain the estimate cannot show (fused kernels, a faster kernel at the same roofline) is worth
    proposing for a minor speed finding only when something says that phase is slow beyond the roofline: the
    user saw it (an observed gap), or a known slow path it leaves (handled by the caller). Without such evidence
    a move that costs quality must promise a large gain (GAP); otherwise the answer is no change."""
    if severity != "minor" or category not in ("decode-speed", "prefill-speed") or c.measured_better:
        return True
    if category in seen:
        return True
    g = relief(c.expected, category)
    # nothing says this phase is slow beyond the roofline: only a real gain, and a lossy one only when large
    return g >= REAL_GAIN and (c.quality_risk == "none" or g >= GAP)
