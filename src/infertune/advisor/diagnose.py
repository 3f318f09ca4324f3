"""Where it hurts, with the estimator's numbers as evidence.

Categories (public): load-memory, kv-cache-growth, long-input-attention, concurrency, decode-speed,
prefill-speed, none. Memory failures rank first (nothing runs until they are fixed), then queueing under
concurrency, then speed. What the user saw (`Facts.observed`, advisor/observed.py) ranks before what the
estimate says: an observed out-of-memory makes its phase the bottleneck, and an observed speed far from the
expected one is a finding of its own that no estimated memory item hides.
"""

from __future__ import annotations

from pydantic import BaseModel

from infertune.advisor.observed import Finding, GiB, Severity, host_ram_finding, observed_findings
from infertune.estimate import Estimate
from infertune.estimate.bands import describe
from infertune.measure.results import TrialResult
from infertune.techniques.base import Category, Facts, Setup

__all__ = ["Diagnosis", "Finding", "Severity", "diagnose", "serving_times", "worst_device"]


class Diagnosis(BaseModel):
    bottleneck: Category
    ranked: list[Finding]
    evidence: dict[str, float | int | bool | str | None]  # headline numbers: estimates, and measured_* when given


def _g(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def worst_device(e: Estimate):
    """The checked device with the least headroom (Estimate.tightest)."""
    return e.tightest()


def serving_times(f: Facts, s: Setup, e: Estimate) -> dict[str, float]:
    """Per-request latency and throughput under the workload's concurrency, from the expected speed (the
    roofline when no expected figure exists)."""
    sp = e.speed.expected or e.speed
    e2e = sp.ttft_s + sp.tpot_s * max(f.max_new_tokens - 1, 0)
    if s.batching == "serial" and f.concurrency > 1:
        # one generate call at a time: request k waits for the k-1 before it
        wait = (f.concurrency - 1) / 2 * e2e
        tps = f.batch * f.max_new_tokens / e2e
    else:
        wait, tps = 0.0, sp.tokens_per_s
    return {"e2e_s": e2e, "queue_wait_mean_s": wait, "tokens_per_s": tps}


def _measured_evidence(t: TrialResult) -> tuple[list[str], dict[str, float | int | bool | str | None]]:
    m = t.metrics
    if t.status != "ok" or m is None:
        return [f"measured: the trial ended {t.status}: {t.error}"], {"measured_status": t.status}
    lines = [
        f"measured: peak {_g(m.peak_memory_bytes)} ({m.memory_kind}), TTFT {m.ttft_s * 1e3:.0f} ms, "
        f"{(m.tpot_s or 0) * 1e3:.1f} ms per token, {m.tokens_per_s:.1f} tokens/s"
    ]
    if m.concurrency > 1 and m.ttft_p99_s is not None:  # queueing, as measured
        lines.append(
            f"measured with {m.concurrency} requests arriving together ({t.config.batching}): TTFT p50 "
            f"{m.ttft_p50_s * 1e3:.0f} ms, p99 {m.ttft_p99_s * 1e3:.0f} ms, {m.requests_per_s or 0:.2f} requests/s"
        )
    return lines, {
        "measured_status": t.status,
        "measured_peak_bytes": m.peak_memory_bytes,
        "measured_ttft_s": m.ttft_s,
        "measured_tpot_s": m.tpot_s,
    }


def _expected_vs_measured(e: Estimate, t: TrialResult) -> list[str]:
    """The expected figures beside the measured ones, expected/measured as the figure (1.0: exact)."""
    x, m = e.speed.expected, t.metrics
    if x is None or m is None or t.status != "ok":
        return []
    out = [
        f"expected TTFT {x.ttft_s * 1e3:.0f} ms vs measured {m.ttft_s * 1e3:.0f} ms "
        f"(expected/measured {x.ttft_s / m.ttft_s:.2f})"
    ]
    if m.tpot_s:
        out.append(
            f"expected {x.tpot_s * 1e3:.1f} ms per token vs measured {m.tpot_s * 1e3:.1f} ms "
            f"(expected/measured {x.tpot_s / m.tpot_s:.2f}; roofline bound {e.speed.tpot_s * 1e3:.1f} ms)"
        )
    return out


def diagnose(
    f: Facts,
    s: Setup,
    e: Estimate,
    e_prompt: Estimate,
    measured: TrialResult | None = None,
    e_static: Estimate | None = None,
) -> Diagnosis:
    """`e` is the estimate for the whole workload; `e_prompt` the same with one new token (what the
    prefill alone needs), which separates "fits at load, runs out while generating" from the rest.
    `measured`: a trial of this setup, when one exists: its numbers join the evidence, and a measured
    out-of-memory makes memory the bottleneck even where the estimate says it fits. `e_static`: the same
    setup holding one token (weights and runtime alone), placed as the setup places them: whether the
    weights fit is read per device, so a model spread over several GPUs is not compared with one."""
    m = e.memory
    worst = worst_device(e)
    findings: list[Finding] = []
    cap = worst.capacity_bytes if worst else 0
    static = m.weights_bytes + m.overhead_bytes
    one_device = s.device_map is None and s.tp * s.pp == 1
    static_short = (not all(fd.fits for fd in e_static.fit_details)) if e_static is not None else static > cap
    # a dtype conversion at load holds both copies only where the model loads into host RAM (a CPU target: measured
    # near 1.7x, docs/estimator.md); a GPU receives tensor by tensor, converted as each is placed (estimate/loading.py)
    converting = one_device and f.platform == "cpu" and m.load_peak_bytes > cap
    if worst and (converting or static_short):
        findings.append(
            Finding(
                category="load-memory",
                severity="blocking",
                bytes=static,
                evidence=[
                    f"weights {_g(m.weights_bytes)} ({s.dtype}, {s.quantization} quantization) "
                    f"+ runtime {_g(m.overhead_bytes)}"
                    + (
                        f" vs {_g(cap)} on {worst.device}"
                        if one_device
                        else f" placed over {len(e.fit_details)} devices: {worst.device} needs "
                        f"{_g(worst.needed_bytes)} of {_g(cap)}"
                    ),
                    *([f"load peak {_g(m.load_peak_bytes)} in RAM (dtype conversion holds both copies)"] * converting),
                ],
            )
        )
    elif worst and not worst.fits:
        grows = e_prompt.fit_details and all(fd.fits for fd in e_prompt.fit_details)
        if m.attention_scratch_bytes and m.attention_scratch_bytes > m.kv_cache_bytes / 2:
            findings.append(
                Finding(
                    category="long-input-attention",
                    severity="blocking",
                    bytes=m.attention_scratch_bytes,
                    evidence=[
                        f"{s.attn} attention materialises {_g(m.attention_scratch_bytes)} of scores for "
                        f"{f.input_len:,}-token prompts (batch {f.batch}); {worst.device} is short by "
                        f"{_g(-worst.headroom_bytes)}"
                    ],
                )
            )
        kv_ev = [
            f"KV cache {_g(m.kv_cache_bytes)} at {f.input_len + f.max_new_tokens:,} tokens x "
            f"{e.settings.batch * e.settings.concurrency} sequences; {worst.device} short by "
            f"{_g(-worst.headroom_bytes)}"
        ]
        if grows:
            kv_ev.append(f"the prefill fits ({_g(e_prompt.memory.total_bytes)}): memory runs out as generation grows")
        if f.concurrency > 1 and s.batching != "serial":
            findings.append(
                Finding(
                    category="concurrency",
                    severity="blocking",
                    bytes=m.kv_cache_bytes,
                    evidence=[
                        *kv_ev,
                        f"per-request state: {f.concurrency} concurrent requests; at most {e.max_concurrency or 0} fit",
                    ],
                )
            )
        else:
            findings.append(
                Finding(category="kv-cache-growth", severity="blocking", bytes=m.kv_cache_bytes, evidence=kv_ev)
            )
    else:
        # It fits. Still worth saying: eager attention at long inputs, and a KV cache that dominates memory.
        if m.attention_scratch_bytes > 0.25 * m.total_bytes:
            findings.append(
                Finding(
                    category="long-input-attention",
                    severity="major",
                    bytes=m.attention_scratch_bytes,
                    evidence=[
                        f"{s.attn} attention holds {_g(m.attention_scratch_bytes)} of scores "
                        f"({m.attention_scratch_bytes / m.total_bytes:.0%} of the peak)"
                    ],
                )
            )
        if worst and worst.headroom_bytes < 0.1 * cap and m.kv_cache_bytes > 0.3 * m.total_bytes:
            findings.append(
                Finding(
                    category="kv-cache-growth",
                    severity="major",
                    bytes=m.kv_cache_bytes,
                    evidence=[
                        f"fits with only {_g(worst.headroom_bytes)} to spare; the KV cache is {_g(m.kv_cache_bytes)}"
                    ],
                )
            )

    times = serving_times(f, s, e)
    if f.concurrency > 1 and s.batching == "serial" and not any(x.category == "concurrency" for x in findings):
        findings.append(
            Finding(
                category="concurrency",
                severity="major",
                evidence=[
                    f"{f.concurrency} concurrent requests served one generate call at a time: each waits "
                    f"{times['queue_wait_mean_s']:.1f} s on average behind the others (estimate)",
                    f"throughput stays at one request's {times['tokens_per_s']:.0f} tokens/s; batched decode reads the "
                    "weights once for all sequences",
                ],
            )
        )

    if not any(x.severity == "blocking" for x in findings):
        sp = e.speed
        x = sp.expected or sp
        decode = x.tpot_s * max(f.max_new_tokens - 1, 0)
        cat: Category = "prefill-speed" if x.prefill_s > decode else "decode-speed"
        findings.append(
            Finding(
                category=cat,
                severity="minor",
                evidence=[
                    f"prefill {x.prefill_s * 1e3:.1f} ms vs decode {decode * 1e3:.1f} ms ({f.max_new_tokens} tokens at "
                    f"{x.tpot_s * 1e3:.2f} ms) per request, expected on {e.accelerator.name} (roofline bound "
                    f"{sp.tpot_s * 1e3:.2f} ms per token, {sp.limited_by}-bound)"
                ],
            )
        )

    lines: list[str] = []
    extra: dict[str, float | int | bool | str | None] = {}
    if measured is not None:
        lines, extra = _measured_evidence(measured)
        lines += _expected_vs_measured(e, measured)
        if measured.status == "oom" and not any(x.severity == "blocking" for x in findings):
            findings.append(
                Finding(
                    category="kv-cache-growth",
                    severity="blocking",
                    bytes=m.total_bytes,
                    evidence=[
                        "the estimate fits, but the measured trial ran out of memory: other processes may hold memory "
                        "(say --vram), or the estimate misses something here"
                    ],
                )
            )

    host = host_ram_finding(f, s, e)
    if host is not None:
        findings.append(host)
    first: list[Finding] = []  # what the user saw ranks before what the estimate says, severity for severity
    if f.observed is not None:
        first, obs = observed_findings(f, s, e, findings, times)
        extra |= obs
    order = {"blocking": 0, "major": 1, "minor": 2}
    findings.sort(key=lambda x: (order[x.severity], not any(x is y for y in first), -x.bytes))
    findings[0].evidence.extend(lines)  # measured beats estimated: it goes with the top finding
    evidence = {
        "peak_bytes": m.total_bytes,
        "capacity_bytes": cap,
        "fits": bool(worst and worst.fits),
        "weights_bytes": m.weights_bytes,
        "kv_cache_bytes": m.kv_cache_bytes,
        "attention_scratch_bytes": m.attention_scratch_bytes,
        "load_peak_bytes": m.load_peak_bytes,
        "prefill_s": e.speed.prefill_s,
        "tpot_s": e.speed.tpot_s,
        "max_input_len": e.max_input_len,
        "expected_ttft_s": e.speed.expected.ttft_s if e.speed.expected else None,
        "expected_tpot_s": e.speed.expected.tpot_s if e.speed.expected else None,
        "expected_ttft_band": describe(e.speed.band_ttft, e.speed.kind_ttft) if e.speed.expected else None,
        "expected_tpot_band": describe(e.speed.band_tpot, e.speed.kind_tpot) if e.speed.expected else None,
        "max_concurrency": e.max_concurrency,
        **times,
        **extra,
    }
    return Diagnosis(bottleneck=findings[0].category, ranked=findings, evidence=evidence)
