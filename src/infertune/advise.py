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

from infertune.diagnose import Diagnosis, diagnose, serving_times, worst_device
from infertune.errors import UserError
from infertune.estimate import Estimate, _largest
from infertune.measure.results import TrialResult
from infertune.render import config_for, estimate_setup, python_snippet, serve_command
from infertune.schema import SCHEMA_VERSION
from infertune.techniques import REGISTRY, Facts, Setup, Technique


class Expected(BaseModel):
    kind: Literal["estimate"] = "estimate"
    peak_bytes_before: int
    peak_bytes_after: int
    fits_before: bool
    fits_after: bool
    # expected figures (speed.expected: roofline + fixed per-step cost + kernel efficiency): what ranks
    ttft_s_before: float
    ttft_s_after: float
    tpot_s_before: float
    tpot_s_after: float
    tokens_per_s_before: float
    tokens_per_s_after: float
    max_input_len_after: int | None
    max_concurrency_after: int | None
    note: str | None = None  # what the estimate cannot show (kernel quality beyond its factors)
    # the roofline: a bound a run never beats, kept beside the expected figures
    tpot_bound_s_before: float | None = None
    tpot_bound_s_after: float | None = None
    ttft_bound_s_before: float | None = None
    ttft_bound_s_after: float | None = None


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
    settings: dict[str, Any]  # the knobs this one change sets
    expected: Expected
    tradeoffs: list[str]
    docs: list[str]
    compatibility: Compatibility
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
        return (f"{serve_command(f, s)}  # then: infertune loadtest --url http://127.0.0.1:8000 "
                f"--concurrency {f.concurrency}"), None
    if f.concurrency > 1:
        shape += f" --concurrency {f.concurrency} --batching {s.batching}"
        for flag, v in (("--max-batch-tokens", s.max_batch_tokens), ("--cb-block-size", s.cb_block_size),
                        ("--cb-num-blocks", s.cb_num_blocks)):
            if v:
                shape += f" {flag} {v}"
    changed = set(Setup().changes(s)) - {"batching", "max_batch_tokens", "cb_block_size", "cb_num_blocks"}
    if changed <= MEASURE_FLAGS | {"compile"} and s.kv_cache != "quantized":
        attn = shlex.quote(s.attn)
        flags = f" --dtype {s.dtype} --attn {attn}" + (f" --kv-cache {s.kv_cache}" if s.kv_cache != "dynamic" else "")
        return f"infertune measure {shape}{flags}", None
    import yaml

    cfg = config_for(s, f.accelerator.bf16).model_dump(exclude_defaults=True)
    run = {"model": f.model, "input_len": f.input_len, "max_new_tokens": f.max_new_tokens, "batch": f.batch,
           "config": cfg}
    if f.concurrency > 1:
        run["concurrency"] = f.concurrency
    return "infertune measure --workload infertune-run.yaml", yaml.safe_dump(run, sort_keys=False)


# --- the advisor ----------------------------------------------------------------------------------------


def _expected(f: Facts, before: Estimate, after: Estimate, s_before: Setup, s_after: Setup) -> Expected:
    wb, wa = worst_device(before), worst_device(after)
    tb, ta = serving_times(f, s_before, before), serving_times(f, s_after, after)
    note = None
    xb, xa = before.speed.expected or before.speed, after.speed.expected or after.speed
    if s_after.compile and not s_before.compile:
        note = "removes the per-layer dispatch cost (expected figure, CUDA graphs): measure it"
    elif s_after.kernels and not s_before.kernels:
        note = "fused kernels cut launches and memory traffic beyond the estimate's factors: measure it"
    elif s_after.attn != s_before.attn and "eager" not in s_before.attn:
        note = "a faster attention kernel: the roofline bound is unchanged; the gain shows at long prompts"
    return Expected(
        peak_bytes_before=wb.needed_bytes if wb else before.memory.total_bytes,
        peak_bytes_after=wa.needed_bytes if wa else after.memory.total_bytes,
        fits_before=bool(wb and wb.fits), fits_after=bool(wa and wa.fits),
        ttft_s_before=xb.ttft_s + tb["queue_wait_mean_s"], ttft_s_after=xa.ttft_s + ta["queue_wait_mean_s"],
        tpot_s_before=xb.tpot_s, tpot_s_after=xa.tpot_s,
        tokens_per_s_before=tb["tokens_per_s"], tokens_per_s_after=ta["tokens_per_s"],
        max_input_len_after=after.max_input_len, max_concurrency_after=after.max_concurrency, note=note,
        tpot_bound_s_before=before.speed.tpot_s, tpot_bound_s_after=after.speed.tpot_s,
        ttft_bound_s_before=before.speed.ttft_s, ttft_bound_s_after=after.speed.ttft_s,
    )


def _recommend(f: Facts, t: Technique, current: Setup, base: Estimate, issues: list[str]) -> Recommendation:
    after = t.apply(f, current)
    est = estimate_setup(f, after)
    cmd, run_file = validation(f, after)
    return Recommendation(
        technique=t.id, family=t.family, title=t.title, addresses=list(t.addresses), settings=current.changes(after),
        expected=_expected(f, base, est, current, after), tradeoffs=list(t.tradeoffs), docs=list(t.docs),
        compatibility=Compatibility(ok=True, issues=issues), validate_cmd=cmd, run_file=run_file,
        snippet=Snippet(python=python_snippet(f, after), serve=serve_command(f, after)),
    )


def _helps(r: Recommendation, category: str) -> bool:
    x = r.expected
    if category in ("load-memory", "kv-cache-growth", "long-input-attention"):
        return x.peak_bytes_after < x.peak_bytes_before or (x.fits_after and not x.fits_before)
    if category == "concurrency":
        return (x.tokens_per_s_after > x.tokens_per_s_before * 1.05 or x.ttft_s_after < x.ttft_s_before * 0.95
                or (x.fits_after and not x.fits_before))
    if category in ("decode-speed", "prefill-speed"):
        faster = (x.tpot_s_after < x.tpot_s_before * 0.95 if category == "decode-speed"
                  else x.ttft_s_after < x.ttft_s_before * 0.95)
        return faster or (x.note is not None and x.fits_after)
    return False


def _rank_key(f: Facts, r: Recommendation, category: str) -> tuple:
    x, prio = r.expected, REGISTRY[r.technique].rank(f)
    if category in ("load-memory", "kv-cache-growth", "long-input-attention", "concurrency"):
        # what makes it fit first; among those, the expert's order (cheap and lossless before lossy)
        return (not x.fits_after, prio, x.peak_bytes_after)
    return (prio, x.tpot_s_after)


def _tradeoffs(f: Facts, s: Setup, e: Estimate) -> list[WorkloadTradeoff]:
    out: list[WorkloadTradeoff] = []
    worst = worst_device(e)
    if not worst or worst.fits:
        return out
    if e.max_input_len and e.max_input_len < f.input_len:
        out.append(WorkloadTradeoff(change="input_len", value=e.max_input_len,
                                    note=f"prompts of at most {e.max_input_len:,} tokens fit (asked: {f.input_len:,})"))

    def fits_with(n: int) -> bool:
        w = worst_device(estimate_setup(f, s, max_new_tokens=n))
        return bool(w and w.fits)

    t = _largest(1, f.max_new_tokens, fits_with)
    if t and t < f.max_new_tokens:
        out.append(WorkloadTradeoff(change="max_new_tokens", value=t,
                                    note=f"at most {t:,} generated tokens fit (asked: {f.max_new_tokens:,})"))
    if f.concurrency > 1 and s.batching != "serial" and e.max_concurrency and e.max_concurrency < f.concurrency * f.batch:
        out.append(WorkloadTradeoff(change="concurrency", value=e.max_concurrency,
                                    note=f"at most {e.max_concurrency} sequences in flight fit (asked: {f.concurrency * f.batch})"))
    if not out:
        out.append(WorkloadTradeoff(change="none", value=None,
                                    note="no shorter prompt, output or concurrency fits: the weights alone do not"))
    return out


def advise(f: Facts, current: Setup, assumptions: list[str] | None = None,
           questions: list[str] | None = None, measured: TrialResult | None = None) -> Advice:
    """`measured`: a trial of the current setup on this workload (from `infertune measure --output`)."""
    base = estimate_setup(f, current)
    prompt_only = estimate_setup(f, current, max_new_tokens=1)
    diag = diagnose(f, current, base, prompt_only, measured)

    candidates: list[Recommendation] = []
    rejected: list[Rejected] = []
    for t in REGISTRY.values():
        if t.applied(current):
            continue
        c = t.check(f, current)
        if c.blockers:
            rejected.append(Rejected(technique=t.id, reasons=c.blockers))
            continue
        try:
            candidates.append(_recommend(f, t, current, base, c.issues))
        except UserError as e:  # its estimate cannot place the model at all (weights above every budget)
            rejected.append(Rejected(technique=t.id, reasons=[str(e)]))

    ordered: list[Recommendation] = []
    kept = []
    for finding in diag.ranked:
        helping = sorted((r for r in candidates if finding.category in r.addresses and _helps(r, finding.category)),
                         key=lambda r: _rank_key(f, r, finding.category))
        if finding.severity == "minor" and not helping:
            continue  # room to improve only if something compatible improves it
        kept.append(finding)
        ordered += [r for r in helping if r not in ordered]
    if not kept:
        from infertune.diagnose import Finding

        worst = worst_device(base)
        kept = [Finding(category="none", severity="minor", evidence=[
            f"fits with {(worst.headroom_bytes if worst else 0) / 2**30:.2f} GiB to spare and no compatible change is "
            "expected to help this workload (estimate)"])]
    diag = diag.model_copy(update={"ranked": kept, "bottleneck": kept[0].category})

    return Advice(
        model=f.model,
        hardware={"accelerator": f.accelerator.name, "source": f.accelerator.source, "gpus": f.gpus,
                  "memory_bytes": f.accelerator.memory_bytes, "platform": f.platform,
                  "compute_capability": f.accelerator.compute_capability, "cpu_ram_bytes": f.cpu_ram_bytes},
        workload={"input_len": f.input_len, "max_new_tokens": f.max_new_tokens, "batch": f.batch,
                  "concurrency": f.concurrency},
        current=current, diagnosis=diag, next=ordered[0] if ordered else None, recommendations=ordered,
        rejected=rejected, workload_tradeoffs=_tradeoffs(f, current, base),
        assumptions=list(assumptions or []), questions=list(questions or []),
    )

