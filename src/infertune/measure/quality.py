"""Output quality of a candidate against the baseline, on the same prompts (measured, never estimated).

Three views, each with a default a practitioner accepts (docs/tuning.md says why):
- greedy agreement: the share of prompts whose generated tokens match the baseline's exactly, and the
  mean position of the first differing token among those that differ;
- teacher-forced NLL on a fixed reference text: the candidate's mean negative log-likelihood minus the
  baseline's (a perplexity ratio of exp(delta));
- the largest next-token KL divergence KL(baseline || candidate) over the reference positions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel

from infertune.measure.results import TrialResult

# A paragraph every tokenizer handles; scored teacher-forced by every trial of a tune run.
REFERENCE_TEXT = (
    "The library opened a new wing last spring. Its reading room has tall windows that face the river, and in "
    "the afternoon the light falls across the long oak tables. Students come to study, retired teachers come "
    "to read the newspapers, and on Saturdays a volunteer reads stories to children in the corner by the stairs."
)


class Tolerance(BaseModel):
    """Defaults. Any numeric change (bf16, another attention kernel) flips near-tied greedy tokens late in
    some sequences: SmolLM2 fp32 -> bf16 matched 2 of 4 prompts, first divergence at token ~27 of 32, with
    the reference NLL moved by 0.001 nats and max KL 0.003. So token agreement is a loose gate and the
    teacher-forced NLL and KL are the tight ones; a broken change fails all three."""

    min_exact_match: float = 0.25  # share of prompts with identical greedy output
    max_nll_increase: float = 0.05  # nats per token (perplexity x1.05)
    max_kl: float = 0.5  # nats, the worst single position


class Quality(BaseModel):
    kind: Literal["measured"] = "measured"
    exact_match_rate: float
    mean_first_divergence: float | None  # token position, over the prompts that differ; None when all match
    nll_baseline: float | None
    nll_candidate: float | None
    nll_delta: float | None
    perplexity_ratio: float | None
    max_kl: float | None
    passed: bool
    reasons: list[str]


def _first_divergence(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):  # lengths differ when one stops at EOS
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare(
    base: TrialResult,
    cand: TrialResult,
    base_logprobs: Path | None = None,
    cand_logprobs: Path | None = None,
    tol: Tolerance | None = None,
) -> Quality:
    tol = tol or Tolerance()
    by_prompt = {o.prompt_index: o.output_token_ids for o in base.outputs}
    divs = []
    same = 0
    for o in cand.outputs:
        ref = by_prompt.get(o.prompt_index)
        if ref is None:
            continue
        d = _first_divergence(ref, o.output_token_ids)
        if d is None:
            same += 1
        else:
            divs.append(d)
    n = same + len(divs)
    rate = same / n if n else 0.0
    nb = base.metrics.reference_nll if base.metrics else None
    nc = cand.metrics.reference_nll if cand.metrics else None
    delta = nc - nb if nb is not None and nc is not None else None
    max_kl = None
    if base_logprobs and cand_logprobs and base_logprobs.is_file() and cand_logprobs.is_file():
        p, q = np.load(base_logprobs).astype(np.float64), np.load(cand_logprobs).astype(np.float64)
        if p.shape == q.shape:
            max_kl = float((np.exp(p) * (p - q)).sum(axis=-1).max())
    reasons = []
    if rate < tol.min_exact_match:
        reasons.append(f"greedy outputs match on {rate:.0%} of prompts (< {tol.min_exact_match:.0%})")
    if delta is not None and delta > tol.max_nll_increase:
        reasons.append(f"reference NLL up {delta:.3f} nats/token (> {tol.max_nll_increase})")
    if max_kl is not None and max_kl > tol.max_kl:
        reasons.append(f"max next-token KL {max_kl:.3f} nats (> {tol.max_kl})")
    return Quality(
        exact_match_rate=rate,
        mean_first_divergence=float(np.mean(divs)) if divs else None,
        nll_baseline=nb,
        nll_candidate=nc,
        nll_delta=delta,
        perplexity_ratio=float(np.exp(delta)) if delta is not None else None,
        max_kl=max_kl,
        passed=not reasons,
        reasons=reasons,
    )
