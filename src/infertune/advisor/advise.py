"""The advisor: diagnose, check every technique against the facts, estimate each compatible one, rank,
and propose exactly one change as `next`.

Everything numeric in an Advice is an estimate (`kind: "estimate"`); `validate` is the command that
measures it. Shorter prompts, outputs or less concurrency are never a recommendation: they are listed
apart, as workload trade-offs.
"""

from __future__ import annotations

import shlex
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from infertune.advisor.diagnose import Diagnosis, diagnose, worst_device
from infertune.advisor.moves import Expected, effective, expected, helps, rank_key
from infertune.advisor.moves import expected as _expected  # noqa: F401  (the tuner's name for it)
from infertune.core.errors import UserError
from infertune.core.schema import SCHEMA_VERSION
from infertune.estimate import Estimate, _largest
from infertune.measure.results import TrialResult
from infertune.models.hub import REVISION_DOC
from infertune.techniques import REGISTRY, Facts, Setup, Technique
from infertune.techniques.base import EngineEvidence, Risk
from infertune.techniques.render import config_for, estimate_setup, python_snippet, serve_command
from infertune.techniques.upgrade import KNOWN_PROBLEMS, Upgrade


class Compatibility(BaseModel):
    ok: bool
    issues: list[str]


class Snippet(BaseModel):
    python: str
    serve: str  # the `transformers serve` command (or the engine's)


class Recommendation(BaseModel):
    technique: str
    family: str
    title: str
    addresses: list[str]
    settings: dict[str, Any]  # the knobs this one change sets (exactly those that change)
    expected: Expected
    quality_risk: Risk  # what this move may cost in output quality (none: same numerics or back to full)
    needs_hardware: str | None = None  # hardware the user has not stated (more machines): a question, not a fact
    tradeoffs: list[str]
    docs: list[str]
    compatibility: Compatibility
    # the public JSON names it `validate` (a name pydantic's BaseModel already uses)
    validate_cmd: str = Field(serialization_alias="validate")
    run_file: str | None = None  # when the command needs a run file: its YAML
    snippet: Snippet
    # the move measured on this workload and host (a tune run's serve stage: advise --measured RUN): it outranks
    # the estimate above
    measured: list[EngineEvidence] = Field(default_factory=list)

    model_config = ConfigDict(serialize_by_alias=True)

    @property
    def measured_better(self) -> bool:
        return any(e.better for e in self.measured)


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


# --- Setup -> the infertune command that measures it ----------------------------------------------------


MEASURE_FLAGS = {"dtype", "attn", "kv_cache"}  # what `infertune measure` takes as flags


def validation(f: Facts, s: Setup) -> tuple[str, str | None]:
    """The infertune command that measures this setup on the workload (and a run file when flags are not enough)."""
    shape = f"--model {f.model} --input-len {f.input_len} --max-new-tokens {f.max_new_tokens} --batch {f.batch}"
    if s.engine != "transformers":
        return (
            f"{serve_command(f, s)}  # then: infertune loadtest --url http://127.0.0.1:8000 "
            f"--concurrency {f.concurrency}"
        ), None
    if f.concurrency > 1:
        shape += f" --concurrency {f.concurrency} --batching {s.batching}"
        for flag, v in (
            ("--max-batch-tokens", s.max_batch_tokens),
            ("--cb-block-size", s.cb_block_size),
            ("--cb-num-blocks", s.cb_num_blocks),
        ):
            if v:
                shape += f" {flag} {v}"
    changed = set(Setup().changes(s)) - {"batching", "max_batch_tokens", "cb_block_size", "cb_num_blocks"}
    if changed <= MEASURE_FLAGS | {"compile"} and s.kv_cache != "quantized":
        attn = shlex.quote(s.attn)
        flags = f" --dtype {s.dtype} --attn {attn}" + (f" --kv-cache {s.kv_cache}" if s.kv_cache != "dynamic" else "")
        return f"infertune measure {shape}{flags}", None
    import yaml

    cfg = config_for(s, f.accelerator.bf16).model_dump(exclude_defaults=True)
    run = {
        "model": f.model,
        "input_len": f.input_len,
        "max_new_tokens": f.max_new_tokens,
        "batch": f.batch,
        "config": cfg,
    }
    if f.concurrency > 1:
        run["concurrency"] = f.concurrency
    return "infertune measure --workload infertune-run.yaml", yaml.safe_dump(run, sort_keys=False)


# --- the advisor ----------------------------------------------------------------------------------------


def _recommend(
    f: Facts, t: Technique, current: Setup, after: Setup, base: Estimate, base_factors: list[str], issues: list[str]
) -> Recommendation:
    est, factors = effective(f, after, lambda s: estimate_setup(f, s))
    cmd, run_file = validation(f, after)
    addresses = list(t.addresses)
    if isinstance(t, Upgrade):
        problem = t.fixes(current, after)
        addresses = list(problem.addresses) if problem else addresses
        issues = issues + ([f"known problem: {problem.what} ({problem.source})"] if problem else [])
    needs = f"{after.pp} machines of {f.gpus} x {f.accelerator.name} (stated: one)" if after.pp > 1 else None
    return Recommendation(
        technique=t.id,
        family=t.family,
        title=t.title,
        addresses=addresses,
        settings=current.changes(after),
        expected=expected(f, base, est, current, after, base_factors, factors),
        quality_risk=t.risk(f, current, after),
        needs_hardware=needs,
        tradeoffs=list(t.tradeoffs),
        docs=list(t.docs),
        compatibility=Compatibility(ok=True, issues=issues),
        validate_cmd=cmd,
        run_file=run_file,
        snippet=Snippet(python=python_snippet(f, after), serve=serve_command(f, after)),
        measured=[e for e in f.engines_measured if e.engine == after.engine] if t.id == "serving-engine" else [],
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


def _moves(f: Facts, current: Setup, base: Estimate, base_factors: list[str]):
    """Every one-knob move from the current setup: compatible ones estimated, the others with the reasons."""
    candidates: list[Recommendation] = []
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
            try:
                candidates.append(_recommend(f, t, current, after, base, base_factors, c.issues))
            except UserError as e:  # its estimate cannot place the model at all (weights above every budget)
                rejected.append(Rejected(technique=t.id, reasons=[str(e)]))
    return candidates, rejected


def advise(
    f: Facts,
    current: Setup,
    assumptions: list[str] | None = None,
    questions: list[str] | None = None,
    measured: TrialResult | None = None,
) -> Advice:
    """`measured`: a trial of the current setup on this workload (from `infertune measure --output`)."""
    if not f.profile.num_parameters:  # never decide on a zero: weights of 0 bytes "fit" everywhere
        raise UserError(
            f"cannot estimate {f.model}: its parameter count could not be read "
            f"({f.profile.architecture or f.profile.model_type} was not instantiated and no safetensors "
            "header was found), so memory and speed are unknown; give a checkpoint folder with its "
            "*.safetensors files, or measure it (infertune measure)"
        )
    base, base_factors = effective(f, current, lambda s: estimate_setup(f, s))
    prompt_only = estimate_setup(f, current, max_new_tokens=1)
    weights_only = estimate_setup(f, current, input_len=1, max_new_tokens=1, batch=1, concurrency=1)
    diag = diagnose(f, current, base, prompt_only, measured, weights_only)
    candidates, rejected = _moves(f, current, base, base_factors)

    ordered: list[Recommendation] = []
    kept = []
    for finding in diag.ranked:
        cat, sev = finding.category, finding.severity
        # a move measured better on this workload helps whatever the estimate says, and comes first
        helping = sorted(
            (
                r
                for r in candidates
                if cat in r.addresses and (r.measured_better or helps(r.technique, r.expected, cat, sev))
            ),
            key=lambda r: (
                not r.measured_better,
                rank_key(
                    f,
                    r.technique,
                    r.expected,
                    r.quality_risk,
                    r.needs_hardware is not None,
                    sum("?" in i for i in r.compatibility.issues),
                    cat,
                    sev,
                ),
            ),
        )
        if finding.severity == "minor" and not helping:
            continue  # room to improve only if something compatible improves it
        kept.append(finding)
        ordered += [r for r in helping if r not in ordered]
    if not kept:
        from infertune.advisor.diagnose import Finding

        worst = worst_device(base)
        kept = [
            Finding(
                category="none",
                severity="minor",
                evidence=[
                    f"fits with {(worst.headroom_bytes if worst else 0) / 2**30:.2f} GiB to spare and no compatible change is "
                    "expected to help this workload (estimate)"
                ],
            )
        ]
    speed = next((k for k in kept if k.category in ("decode-speed", "prefill-speed")), kept[0])
    speed.evidence.extend(f"speed includes a {label}" for label in base_factors)
    diag = diag.model_copy(update={"ranked": kept, "bottleneck": kept[0].category})
    # a known problem of a version nobody stated: asked where it could be what hurts
    hurts = {k.category for k in kept}
    questions = list(questions or []) + [
        p.question() for p in KNOWN_PROBLEMS if hurts & set(p.addresses) and p.affects(f, current) is None
    ]

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
        diagnosis=diag,
        next=ordered[0] if ordered else None,
        recommendations=ordered,
        rejected=rejected,
        workload_tradeoffs=_tradeoffs(f, current, base),
        assumptions=list(assumptions or []),
        questions=questions,
    )
