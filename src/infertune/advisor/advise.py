"""The advisor: diagnose, check every technique against the facts, estimate each compatible one, rank,
and propose exactly one change as `next`.

Everything numeric in an Advice is an estimate (`kind: "estimate"`); `validate` is the command that
measures it. Shorter prompts, outputs or less concurrency are never a recommendation: they are listed
apart, as workload trade-offs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from infertune.advisor.diagnose import Diagnosis, Finding, diagnose, worst_device
from infertune.advisor.evidence import evidenced, unstated_unseen, with_observed
from infertune.advisor.moves import GAP, MEMORY, Candidate, candidate, cures, effective, helps, observed_gaps, rank_key
from infertune.core.errors import UserError
from infertune.core.schema import SCHEMA_VERSION
from infertune.estimate import Estimate, _largest
from infertune.measure.results import TrialResult
from infertune.models.hub import REVISION_DOC
from infertune.techniques import REGISTRY, Facts, Setup, slow_paths
from infertune.techniques.render import estimate_setup, python_snippet, serve_command, validation
from infertune.techniques.upgrade import KNOWN_PROBLEMS, Upgrade


class Snippet(BaseModel):
    python: str
    serve: str  # the `transformers serve` command (or the engine's)


class Recommendation(Candidate):
    """A candidate as the user reads it: what it is, its trade-offs and docs, the code and the command that
    validates it. Its estimates are the candidate's, as built."""

    family: str
    title: str
    tradeoffs: list[str]
    docs: list[str]
    # the public JSON names it `validate` (a name pydantic's BaseModel already uses)
    validate_cmd: str = Field(serialization_alias="validate")
    run_file: str | None = None  # when the command needs a run file: its YAML
    snippet: Snippet

    model_config = ConfigDict(serialize_by_alias=True)


class Rejected(BaseModel):
    technique: str
    reasons: list[str]


class WorkloadTradeoff(BaseModel):
    kind: Literal["workload-tradeoff"] = "workload-tradeoff"
    change: str
    value: int | None
    note: str


class Advice(BaseModel):
    kind: Literal["advice"] = "advice"
    schema_version: str = SCHEMA_VERSION
    model: str
    model_revision: str | None = Field(None, description=REVISION_DOC)
    hardware: dict[str, Any]
    workload: dict[str, int]
    current: Setup
    diagnosis: Diagnosis
    next: Recommendation | None
    recommendations: list[Recommendation]
    rejected: list[Rejected]
    workload_tradeoffs: list[WorkloadTradeoff]
    assumptions: list[str]
    questions: list[str]

    model_config = ConfigDict(serialize_by_alias=True)


# --- the advisor ----------------------------------------------------------------------------------------


def recommend(f: Facts, c: Candidate) -> Recommendation:
    """The candidate rendered for the user (its estimates untouched)."""
    t = REGISTRY[c.technique]
    cmd, run_file = validation(f, c.setup)
    return Recommendation(
        **dict(c),
        family=t.family,
        title=t.title,
        tradeoffs=t.tradeoffs_for(f, c.setup),
        docs=list(t.docs),
        validate_cmd=cmd,
        run_file=run_file,
        snippet=Snippet(python=python_snippet(f, c.setup), serve=serve_command(f, c.setup)),
    )


def _tradeoffs(f: Facts, s: Setup, e: Estimate) -> list[WorkloadTradeoff]:
    out: list[WorkloadTradeoff] = []
    worst = worst_device(e)
    if not worst or worst.fits:
        return out
    if e.max_input_len and e.max_input_len < f.input_len:
        out.append(
            WorkloadTradeoff(
                change="input_len",
                value=e.max_input_len,
                note=f"prompts of at most {e.max_input_len:,} tokens fit (asked: {f.input_len:,})",
            )
        )

    def fits_with(n: int) -> bool:
        w = worst_device(estimate_setup(f, s, max_new_tokens=n))
        return bool(w and w.fits)

    t = _largest(1, f.max_new_tokens, fits_with)
    if t and t < f.max_new_tokens:
        out.append(
            WorkloadTradeoff(
                change="max_new_tokens",
                value=t,
                note=f"at most {t:,} generated tokens fit (asked: {f.max_new_tokens:,})",
            )
        )
    if (
        f.concurrency > 1
        and s.batching != "serial"
        and e.max_concurrency
        and e.max_concurrency < f.concurrency * f.batch
    ):
        out.append(
            WorkloadTradeoff(
                change="concurrency",
                value=e.max_concurrency,
                note=f"at most {e.max_concurrency} sequences in flight fit (asked: {f.concurrency * f.batch})",
            )
        )
    if not out:
        out.append(
            WorkloadTradeoff(
                change="none",
                value=None,
                note="no shorter prompt, output or concurrency fits: the weights alone do not",
            )
        )
    return out


NO_CHANGE = (
    "no compatible move addresses what you saw: no change proposed for it (the items after it are the estimate's, not "
    "what you saw); measure it (infertune measure) to see where the time goes"
)


@dataclass
class Assessment:
    """What the advisor found before rendering: the current setup's estimate, the findings kept (what hurts, in
    order), every compatible move (built once) and the ones that help in rank order, and the rejected ones."""

    base: Estimate
    diagnosis: Diagnosis
    ranked: list[Candidate]
    compatible: list[Candidate]
    rejected: list[Rejected]
    # the first finding is what the user saw and no compatible move addresses it: the answer is no change (measure),
    # never a move for an item ranked after it
    no_change: bool = False


def _moves(f: Facts, current: Setup, base: Estimate, base_factors: list[str]) -> tuple[list[Candidate], list[Rejected]]:
    """Every one-knob move from the current setup: compatible ones estimated, the others with the reasons."""
    candidates: list[Candidate] = []
    rejected: list[Rejected] = []
    for t in REGISTRY.values():
        targets = t.candidates(f, current)
        if not targets:
            continue
        c = t.check(f, current)
        if c.blockers:
            rejected.append(Rejected(technique=t.id, reasons=c.blockers))
            continue
        for after in targets:
            if c.requires:  # the upgrade a feature needs travels with the move
                after = after.model_copy(update={"packages": {**(after.packages or {}), **c.requires}})
            try:
                candidates.append(candidate(f, t, current, after, base, base_factors, c.issues))
            except UserError as e:  # its estimate cannot place the model at all (weights above every budget)
                rejected.append(Rejected(technique=t.id, reasons=[str(e)]))
    return candidates, rejected


def assess(f: Facts, current: Setup, measured: TrialResult | None = None) -> Assessment:
    """Diagnose the current setup, build every move once and rank those that help what hurts.
    `measured`: a trial of the current setup on this workload (from `infertune measure --output`)."""
    if not f.profile.num_parameters:  # never decide on a zero: weights of 0 bytes "fit" everywhere
        raise UserError(
            f"cannot estimate {f.model}: its parameter count could not be read "
            f"({f.profile.architecture or f.profile.model_type} was not instantiated and no safetensors "
            "header was found), so memory and speed are unknown; give a checkpoint folder with its "
            "*.safetensors files, or measure it (infertune measure)"
        )
    base, base_factors = effective(f, current)
    prompt_only = estimate_setup(f, current, max_new_tokens=1)
    weights_only = estimate_setup(f, current, input_len=1, max_new_tokens=1, batch=1, concurrency=1)
    diag = diagnose(f, current, base, prompt_only, measured, weights_only)
    candidates, rejected = _moves(f, current, base, base_factors)
    gaps = observed_gaps(f, current, base)
    beyond: set[str] = {g.category for g in gaps if g.beyond}  # ... far beyond the expected: evidence in itself
    # ... or beyond the generic 2x but inside a wide validated band (MoE decode): a slow path that holds but for an
    # unstated version may be why (the band is wide where transformers' own path is the slow one)
    suspect = beyond | {g.category for g in gaps if g.ratio > GAP}
    # an upgrade past a problem of an unstated version, without the symptom beyond the model's error: a last resort
    unseen = {id(c) for c in candidates if unstated_unseen(f, current, c, suspect, base)}
    findings = with_observed(f, current, diag.ranked, gaps)
    seen: set[str] = {g.category for g in gaps}  # speeds the user saw: their cures come first

    ordered: list[Candidate] = []
    kept = []
    unhelped: set[int] = set()  # findings of what the user saw that no compatible move addresses
    # a user who ran the setup (a speed observed, no out-of-memory) saw it run: its entries are candidate causes of
    # what they saw (with_observed), not an incompatibility that stops it
    o = f.observed
    ran = o is not None and o.oom is None and any(v is not None for v in (o.tpot_s, o.ttft_s, o.e2e_s, o.tokens_per_s))
    broken = [] if ran else [p for p in slow_paths.matching(f, current) if "crash" in p.symptoms]
    if broken:  # a known incompatibility of the current setup: it does not run as stated, whatever the estimate
        fixing = sorted(
            (
                c
                for c in candidates
                if c.expected.fits_after
                and any(c.technique in p.cures and p.holds(f, c.setup) is False for p in broken)
            ),
            key=lambda c: rank_key(f, c, "none", "blocking"),
        )
        if fixing:
            kept.append(
                Finding(
                    category="none",
                    severity="blocking",
                    evidence=[f"known incompatibility, not a resource limit: {p.line()}" for p in broken],
                )
            )
            ordered += fixing
    for finding in findings:
        cat, sev = finding.category, finding.severity
        # a move that leaves a known slow path of the current setup with this symptom (any that may hold, when
        # the user saw the symptom) is evidence in itself; it comes first where the user saw the symptom
        cured = {id(c): cures(f, current, c, cat, maybe=cat in suspect) for c in candidates}
        helping = sorted(
            (
                c
                for c in candidates
                if (cat in c.addresses and (c.measured_better or helps(c, cat, sev)) and evidenced(c, cat, sev, beyond))
                or (cured[id(c)] and c.expected.fits_after)
            ),
            key=lambda c: (
                not c.measured_better,
                id(c) in unseen,
                not (cat in seen and cured[id(c)]),
                # a slow path that holds as stated before one that holds only if an unstated version is the bad one
                not (cat in seen and any(p.holds(f, current) is True for p in cured[id(c)])),
                # a new major release of a library changes more than the one problem it fixes: where the user saw
                # the symptom (its cures first), after a move that cures the same thing without it
                cat in seen and c.technique == "upgrade" and Upgrade().crosses_major(f, current, c.setup),
                rank_key(f, c, cat, sev),
            ),
        )
        host = bool(finding.evidence) and finding.evidence[0].startswith("host RAM at load")  # not the device's
        if sev == "blocking" and cat in (*MEMORY, "concurrency") and not host and all(id(c) in unseen for c in helping):
            # memory on a device is one pool: where no move of this finding's own kind applies (but a last resort),
            # a move that frees the device otherwise (weights quantized or offloaded) relieves it too
            freeing = sorted(
                (
                    c
                    for c in candidates
                    if c not in helping
                    and set(c.addresses) & set(MEMORY)
                    and helps(c, cat, sev)
                    and id(c) not in unseen
                ),
                key=lambda c: rank_key(f, c, cat, sev),
            )
            helping = freeing + helping
        for c in helping:
            for p in cured[id(c)]:
                line = f"leaves the known slow path {p.id} ({p.sources[0]})"
                if line not in c.compatibility.issues:
                    c.compatibility.issues.append(line)
        if finding.severity == "minor" and not helping and cat not in seen:
            continue  # room to improve only if something compatible improves it (what the user saw stays)
        if cat in seen and not helping:
            unhelped.add(id(finding))
        kept.append(finding)
        ordered += [c for c in helping if c not in ordered]
    if not kept:
        worst = worst_device(base)
        spare = (worst.headroom_bytes if worst else 0) / 2**30
        kept = [
            Finding(
                category="none",
                severity="minor",
                evidence=[
                    f"fits with {spare:.2f} GiB to spare and no compatible change is "
                    "expected to help this workload (estimate)"
                ],
            )
        ]
    no_change = id(kept[0]) in unhelped
    if no_change:
        kept[0].evidence.append(NO_CHANGE)
    speed = next((k for k in kept if k.category in ("decode-speed", "prefill-speed")), kept[0])
    speed.evidence.extend(f"speed includes a {label}" for label in base_factors)
    diag = diag.model_copy(update={"ranked": kept, "bottleneck": kept[0].category})
    return Assessment(base, diag, ordered, candidates, rejected, no_change)


def moves_to_try(f: Facts, current: Setup, worth_a_trial: bool = False) -> list[Candidate]:
    """Every compatible move from `current`, as the advisor built it: the ranked ones first (what it would
    recommend, in order), then the others in the expert's order. What the tuner measures, in this order.
    `worth_a_trial`: leave out the unranked moves whose estimate sees no difference at all (`no_expected_change`)."""
    a = assess(f, current)
    rest = sorted((c for c in a.compatible if c not in a.ranked), key=lambda c: REGISTRY[c.technique].rank(f))
    if worth_a_trial:
        rest = [c for c in rest if not no_expected_change(c)]
    return a.ranked + rest


def no_expected_change(c: Candidate) -> bool:
    """A move the advisor does not rank and whose estimate sees no difference on any axis (FlexAttention after sdpa
    for a plain causal mask): a tune does not spend trials on it; the report lists it as not measured, and why."""
    return c.expected is not None and not c.expected.sees_a_difference()


def advise(
    f: Facts,
    current: Setup,
    assumptions: list[str] | None = None,
    questions: list[str] | None = None,
    measured: TrialResult | None = None,
) -> Advice:
    """`measured`: a trial of the current setup on this workload (from `infertune measure --output`)."""
    a = assess(f, current, measured)
    # a known problem of a version nobody stated: asked where it could be what hurts
    hurts = {k.category for k in a.diagnosis.ranked}
    questions = list(questions or []) + [
        p.question() for p in KNOWN_PROBLEMS if hurts & set(p.addresses) and p.affects(f, current) is None
    ]
    ordered = [recommend(f, c) for c in a.ranked]
    return Advice(
        model=f.model,
        hardware={
            "accelerator": f.accelerator.name,
            "source": f.accelerator.source,
            "gpus": f.gpus,
            "memory_bytes": f.accelerator.memory_bytes,
            "platform": f.platform,
            "compute_capability": f.accelerator.compute_capability,
            "cpu_ram_bytes": f.cpu_ram_bytes,
        },
        workload={
            "input_len": f.input_len,
            "max_new_tokens": f.max_new_tokens,
            "batch": f.batch,
            "concurrency": f.concurrency,
        },
        current=current,
        diagnosis=a.diagnosis,
        next=ordered[0] if ordered and not a.no_change else None,
        recommendations=ordered,
        rejected=a.rejected,
        workload_tradeoffs=_tradeoffs(f, current, a.base),
        assumptions=list(assumptions or []),
        questions=questions,
    )
