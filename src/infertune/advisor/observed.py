"""What the user saw, as findings: an observed out-of-memory, a speed far from the expected one, and host RAM at
load (a loading path the estimate of the running model does not hold).

An observation outranks an estimate: an observed out-of-memory makes its phase the bottleneck whatever the estimate
says; an observed speed beyond OBSERVED_GAP of the expected figure is a major finding of its own; and a user who
ran the setup (a speed observed, no out-of-memory) is never blocked by an estimated memory item: those rank after
what they saw.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from infertune.estimate import Estimate
from infertune.techniques.base import Category, Facts, Setup

Severity = Literal["blocking", "major", "minor"]
GiB = 2**30
# The expected speed model's stated error: docs/estimator.md reports its figures within about 2x of measured runs
# (it publishes no per-estimate band), so an observed time more than 2x the expected one (or a throughput below
# half) is a slow path the model does not price, not noise.
OBSERVED_GAP = 2.0
HOST_RAM_MOVES = (
    "moves: a safetensors checkpoint (a revision that ships one, or convert the .bin shards once), device_map / "
    "low_cpu_mem_usage=True (the model is built on the meta device), transformers >= 4.51 (always so), or a "
    "pre-quantized checkpoint"
)
# what the workload holds beside the weights: a finding of these categories is sized by prompts, outputs, sequences
WORKLOAD_STATE: tuple[Category, ...] = ("kv-cache-growth", "concurrency", "long-input-attention")


class Finding(BaseModel):
    category: Category
    severity: Severity  # blocking: it does not run; major: it runs badly; minor: room to improve
    evidence: list[str]
    bytes: int = 0  # how much memory this problem accounts for (ranks memory findings)


def _g(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def _t(s: float) -> str:
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.2f} s"


def host_ram_finding(f: Facts, s: Setup, e: Estimate) -> Finding | None:
    """Host RAM at load against the target's RAM (known: --cpu-ram, or this host's): blocking when the loading path
    needs more (techniques/checkpoint.py). A GPU target's model is read through host RAM; a CPU target's lives there
    (its device check covers the weights, so only a .bin shard read whole on top of them is this finding's)."""
    from infertune.techniques.checkpoint import host_load

    ram = f.cpu_ram_bytes
    if not ram:
        return None
    need, load = host_load(f, s, e.memory.weights_bytes, e.memory.overhead_bytes)
    if need <= ram or (f.platform == "cpu" and not load.transient):
        return None
    return Finding(
        category="load-memory",
        severity="blocking",
        bytes=need,
        evidence=[f"host RAM at load: {load.why} needs {_g(need)} of {_g(ram)} RAM", HOST_RAM_MOVES],
    )


def _oom_finding(f: Facts, s: Setup, e: Estimate, findings: list[Finding]) -> Finding:
    """The phase the user saw run out of memory, as the blocking finding (an estimated one of that category kept,
    with the observation first in its evidence)."""
    o, m = f.observed, e.memory
    assert o is not None and o.oom is not None
    cat: Category
    # weights that do not fit the device (an estimated blocking load-memory finding): an out-of-memory seen in a
    # later phase is still the load's (a device_map offload or a lazy first forward moves when it shows)
    too_big = o.oom in ("prefill", "decode") and any(
        x.category == "load-memory" and x.severity == "blocking" and not x.evidence[0].startswith("host RAM at load")
        for x in findings
    )
    # the weights fit but the workload's state does not (an estimated blocking cache or scores finding): an
    # out-of-memory seen while loading is that state allocated up front (a static cache sized at load, an engine
    # reserving its KV blocks, a reference loop preallocating its cache), not the weights
    upfront = (
        next((x for x in findings if x.severity == "blocking" and x.category in WORKLOAD_STATE), None)
        if o.oom == "load" and not any(x.category == "load-memory" and x.severity == "blocking" for x in findings)
        else None
    )
    if too_big:
        cat, nbytes = "load-memory", m.weights_bytes + m.overhead_bytes
        line = (
            f"observed: out of memory in the {o.oom} phase, and the weights alone do not fit (estimate: weights "
            f"{_g(m.weights_bytes)} + runtime {_g(m.overhead_bytes)})"
        )
    elif upfront is not None:
        cat, nbytes = upfront.category, upfront.bytes
        line = (
            f"observed: out of memory while loading; the weights fit (estimate: {_g(m.weights_bytes)} + runtime "
            f"{_g(m.overhead_bytes)}) but the workload's state does not: memory reserved up front for it (a static "
            "or preallocated cache, an engine's KV blocks) runs out at load"
        )
    elif o.oom in ("load", "host-ram"):
        cat, nbytes = "load-memory", m.weights_bytes + m.overhead_bytes
        if o.oom == "host-ram":
            line = "host RAM at load: observed out of host memory while loading"
        else:
            line = (
                f"observed: out of memory while loading (estimate: weights {_g(m.weights_bytes)} + runtime "
                f"{_g(m.overhead_bytes)}): other processes may hold memory (say --vram), or the loading path holds more"
            )
    elif o.oom == "prefill":
        # the prompt's transients (attention scores, activations) against its cache: the larger share names it
        transient = m.attention_scratch_bytes + m.activations_bytes
        big = transient > m.kv_cache_bytes / 2
        cat = "long-input-attention" if big else "kv-cache-growth"
        nbytes = transient if big else m.kv_cache_bytes
        line = (
            f"observed: out of memory in the prefill ({f.input_len:,}-token prompts, batch {f.batch}); estimate: "
            f"{s.attn} attention scores {_g(m.attention_scratch_bytes)}, activations {_g(m.activations_bytes)}, "
            f"KV cache {_g(m.kv_cache_bytes)}"
        )
    else:
        cat = "concurrency" if f.concurrency > 1 and s.batching != "serial" else "kv-cache-growth"
        nbytes = m.kv_cache_bytes
        line = (
            f"observed: out of memory while generating: the KV cache grows to {_g(m.kv_cache_bytes)} at "
            f"{f.input_len + f.max_new_tokens:,} tokens x {f.batch * (f.concurrency if s.batching != 'serial' else 1)}"
            " sequences (estimate)"
        )
    same = [
        x
        for x in findings
        if x.category == cat and (o.oom != "host-ram" or x.evidence[0].startswith("host RAM at load"))
    ]
    if same:
        found = same[0]
        found.severity = "blocking"
        found.evidence.insert(0, line)
        return found
    found = Finding(category=cat, severity="blocking", bytes=nbytes, evidence=[line])
    if o.oom == "host-ram":
        found.evidence.append(HOST_RAM_MOVES)
    findings.append(found)
    return found


def _gaps(f: Facts, e: Estimate, times: dict[str, float]) -> list[tuple[str, Category, float, str]]:
    """(key, category, observed/expected as a slowdown, the line) per observed speed figure."""
    o = f.observed
    assert o is not None
    x = e.speed.expected or e.speed
    decode = x.tpot_s * max(f.max_new_tokens - 1, 0)
    e2e_cat: Category = "prefill-speed" if x.prefill_s > decode else "decode-speed"
    out: list[tuple[str, Category, float, str]] = []
    checks: tuple[tuple[str, float | None, float, Category, str], ...] = (
        ("tpot", o.tpot_s, x.tpot_s, "decode-speed", "per token"),
        ("ttft", o.ttft_s, x.ttft_s, "prefill-speed", "to the first token"),
        ("e2e", o.e2e_s, times["e2e_s"], e2e_cat, "per request"),
    )
    for key, seen, expected, cat, what in checks:
        if seen is not None and expected > 0:
            out.append((key, cat, seen / expected, f"observed {_t(seen)} {what}, {{r}} the expected {_t(expected)}"))
    if o.tokens_per_s is not None and times["tokens_per_s"] > 0:
        want = times["tokens_per_s"]
        out.append(
            (
                "tokens_per_s",
                "decode-speed",
                want / o.tokens_per_s,
                f"observed {o.tokens_per_s:,.1f} tokens/s, {{r}} the expected {want:,.1f}",
            )
        )
    return [(k, c, r, line.format(r=f"{r:.1f}x" if r >= 1 else f"{1 / r:.1f}x faster than")) for k, c, r, line in out]


def observed_findings(
    f: Facts, s: Setup, e: Estimate, findings: list[Finding], times: dict[str, float]
) -> tuple[list[Finding], dict[str, float | int | bool | str | None]]:
    """Adds what the user saw to `findings` (in place) and returns the findings that rank first within their
    severity, and the evidence keys (observed_*, observed_vs_expected_*)."""
    o = f.observed
    assert o is not None
    ev: dict[str, float | int | bool | str | None] = {
        f"observed_{k}": v for k, v in o.model_dump(exclude={"kind"}).items() if v is not None
    }
    first: list[Finding] = []
    if o.oom is not None:
        first.append(_oom_finding(f, s, e, findings))
    if o.peak_bytes is not None and e.memory.total_bytes > 0:
        ev["observed_vs_expected_peak"] = round(o.peak_bytes / e.memory.total_bytes, 3)
    gaps = _gaps(f, e, times)
    for key, _, ratio, _ in gaps:
        ev[f"observed_vs_expected_{key}"] = round(ratio, 3)
    # the speed findings themselves (major beyond OBSERVED_GAP, with their candidate causes) are the advisor's
    # (advisor.evidence.with_observed): they need the known slow paths of the setup, which sit above the diagnosis
    ran = o.oom is None and any(v is not None for v in (o.tpot_s, o.ttft_s, o.e2e_s, o.tokens_per_s))
    if ran:  # it loaded and ran: an estimated memory blocker is the estimate's error, not the user's problem
        for x in findings:
            if x.severity == "blocking" and not any(x is y for y in first):
                x.severity = "major"
                x.evidence.append(
                    "estimate only: you ran this setup (a speed observed, no out-of-memory), so it fits as you run it"
                )
    return first, ev
