"""The tune's serve stage: the accepted setup served by `transformers serve` without and with continuous
batching, and by every installed serving engine (vLLM), all on the same load (the workload's prompts, the same
concurrency levels, the same request count), each load-tested (measured); an engine that is not installed is
a row that says so, with the command that installs it.

The choice is noise-aware, in the spirit of the tuning loop (decide.py): each server runs the workload's
concurrency level in `rounds` back-to-back rounds; a variant's objective is the median of its rounds, its spread
the rounds' relative half-width (measure/stats.spread). Servers cannot be interleaved (an engine takes minutes to
start), so two variants differ clearly only when the ratio of their medians lies outside the sum of their
spreads (the band of the ratio) and by MIN_GAIN. The choice starts at the setup as accepted and moves to a later
variant (the other batching mode, then the engines: more to deploy) only when that one meets the SLOs and is
clearly better; a difference within the spread leaves the simpler stack in place ("inconclusive").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from infertune.core.config import vllm_flags
from infertune.core.errors import UserError
from infertune.core.workload import Workload
from infertune.measure.stats import spread
from infertune.serving import engines
from infertune.serving.loadtest import LevelResult
from infertune.serving.trial import ServeTrial, run_serve_trial
from infertune.techniques import Facts, Setup
from infertune.techniques.batching import batching_switched
from infertune.techniques.render import serve_flags_for
from infertune.tuning.run import Constraints, Run, ServeStep, Step, TuneSpec
from infertune.tuning.verdict import MIN_GAIN, Objective

ROUNDS = 3  # rounds of the workload's concurrency level per server: the spread a choice is judged against
WIRED = ("vllm",)  # engines the serve stage can start (their flags are translated)


def serve_variants(f: Facts, s: Setup) -> list[tuple[str, list[str]]]:
    """The accepted setup's `transformers serve` flags, and the same with continuous batching switched
    (on as the technique applies it: no torch.compile, which serve refuses with it, and a paged cache sized
    to the workload). Empty when serve cannot run the setup."""
    if s.engine != "transformers" or s.tp > 1 or s.device_map is not None:
        return []
    if s.batching == "continuous":
        mine = "transformers serve, continuous batching (as accepted)"
        other = "transformers serve, without continuous batching"
    else:
        mine, other = "transformers serve (as accepted)", "transformers serve, continuous batching"
    return [(mine, serve_flags_for(s)), (other, serve_flags_for(batching_switched(f, s)))]


def max_model_len(wl: Workload) -> int:
    """The longest sequence an engine must hold: the longest prompt (512 for natural prompts) plus the output
    and a chat template's tokens, rounded up to 256."""
    need = (wl.longest_input or 512) + wl.max_new_tokens + 64
    return -(-need // 256) * 256


def engine_variants(s: Setup, wl: Workload) -> list[tuple[str, str, list[str] | None, engines.EngineInfo]]:
    """(engine, label, flags or None when it cannot be started here, its install record) per known engine."""
    out = []
    for name in engines.ENGINES:
        info = engines.info(name)
        flags = (
            vllm_flags(
                dtype=s.dtype,
                max_model_len=max_model_len(wl),
                max_num_seqs=wl.concurrency,
                quantization=s.quantization if s.quantization != "none" else None,
            )
            if name in WIRED
            else None
        )
        out.append((name, name, flags, info))
    return out


def served_objective(objective: Objective, t: ServeTrial, concurrency: int) -> float | None:
    level = next((lv for lv in t.load.levels if lv.concurrency == concurrency), None)
    return level_objective(objective, level, t) if level else None


def level_objective(objective: Objective, level: LevelResult, t: ServeTrial) -> float | None:
    if level.requests_ok == 0:
        return None
    return {
        "memory": t.peak_memory_bytes or t.server_peak_rss_bytes,
        "latency": level.e2e_s.p50,
        "throughput": level.output_tokens_per_s,
    }[objective]


def conversations(wl: Workload) -> list[list[dict]]:
    """The workload's prompts as chat requests (at their natural length: a server pads nothing)."""
    return [
        [{"role": "user", "content": p}] if isinstance(p, str) else [m.model_dump() for m in p]
        for p in wl.prompt_list()
    ]


def slo_misses(constraints: Constraints, t: ServeTrial, rounds: list[LevelResult]) -> list[str]:
    """The tune's limits against the served level (p95 over requests, median over rounds; server memory over
    all its processes). A failed request misses every SLO."""
    out = []
    failed = sum(lv.requests_failed for lv in rounds)
    if failed:
        out.append(f"{failed} failed request(s)")
    ttft = [lv.ttft_s.p95 for lv in rounds if lv.ttft_s.p95 is not None]
    itl = [lv.itl_s.p95 for lv in rounds if lv.itl_s.p95 is not None]
    if constraints.max_ttft_s is not None and ttft and float(np.median(ttft)) > constraints.max_ttft_s:
        out.append(f"TTFT p95 {float(np.median(ttft)):.3f} s > {constraints.max_ttft_s} s")
    if constraints.max_tpot_s is not None and itl and float(np.median(itl)) > constraints.max_tpot_s:
        out.append(f"inter-token p95 {float(np.median(itl)):.4f} s > {constraints.max_tpot_s} s")
    peak = t.peak_memory_bytes or t.server_peak_rss_bytes
    if constraints.max_memory_bytes is not None and peak and peak > constraints.max_memory_bytes:
        out.append(f"server peak memory {peak / 2**20:,.0f} MiB > {constraints.max_memory_bytes / 2**20:,.0f} MiB")
    return out


def _measure(
    spec: TuneSpec, label: str, engine: str, flags: list[str], log: Path, rounds: int, ready_timeout_s: float | None
) -> ServeStep:
    wl = spec.workload
    c = wl.concurrency
    levels = sorted({1, c}) + [c] * (rounds - 1)  # the workload's level again, back to back: its spread
    try:
        t = run_serve_trial(
            spec.model_path,
            flags,
            log,
            levels,
            c * max(2, wl.repeats),
            wl.max_new_tokens,
            conversations(wl),
            ready_timeout_s=ready_timeout_s,
            engine=engine,
        )
    except UserError as e:  # the server did not come up: that variant's result, the run goes on
        return ServeStep(label=label, engine=engine, flags=flags, trial=None, error=str(e), objective=None)
    at_c = [lv for lv in t.load.levels if lv.concurrency == c][-rounds:]
    values = [v for v in (level_objective(spec.objective, lv, t) for lv in at_c) if v is not None]
    if spec.objective == "memory":  # one reading per server: the server's peak over the whole load test
        values = values[:1]
    # the trial shows one level per concurrency: at the workload's, the round whose objective is the median
    shown = (
        min(at_c, key=lambda lv: abs((level_objective(spec.objective, lv, t) or 0) - float(np.median(values))))
        if values
        else at_c[0]
    )
    others = [lv for lv in t.load.levels if lv.concurrency != c]
    kept = sorted([*others[:1], shown] if c != 1 else [shown], key=lambda lv: lv.concurrency)
    t = t.model_copy(update={"load": t.load.model_copy(update={"levels": kept})})
    return ServeStep(
        label=label,
        engine=engine,
        flags=flags,
        trial=t,
        rounds=values,
        objective=float(np.median(values)) if values else None,
        spread=spread(values),
        slo_missed=slo_misses(spec.constraints, t, at_c),
    )


def serve_stage(
    run: Run,
    facts: Facts,
    best: Step,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    ready_timeout_s: float | None = 300.0,
    rounds: int = ROUNDS,
) -> list[ServeStep]:
    """Serve `best`, the step the loop accepted last, with transformers (both batching modes) and every
    installed engine on the same load; each result appended to serve.jsonl as it comes; finished variants are
    not re-run on resume (an engine listed as not installed is measured on resume once it is).
    `ready_timeout_s`: transformers serve's start-up budget (an engine gets its own, longer one: it compiles first)."""
    spec = run.spec()
    emit = on_event or (lambda e: None)
    done = latest(run.serve_steps())
    plan: list[tuple[str, str, list[str] | None, engines.EngineInfo | None]] = [
        ("transformers", label, flags, None) for label, flags in serve_variants(facts, best.setup)
    ]
    if plan:
        plan += engine_variants(best.setup, spec.workload)
    for k, (engine, label, flags, info) in enumerate(plan):
        old = next((d for d in done if d.label == label), None)
        if old is not None and (old.status != "not measured" or info is None or not info.ok):
            continue
        if info is not None and (not info.ok or flags is None):
            why = (
                (
                    "not installed"
                    if engines.engine(engine).cpu_packages or engines.has_gpu()
                    else "not installed (it has no CPU build: a host with an NVIDIA GPU)"
                )
                if not info.ok
                else f"installed ({info.version}), but the serve stage cannot start {engine} yet"
            )
            step = ServeStep(
                label=label,
                engine=engine,
                flags=flags or [],
                trial=None,
                error=why,
                objective=None,
                install=info.install if not info.ok else None,
            )
        else:
            emit({"event": "serve", "label": label, "flags": flags, "engine": engine})
            step = _measure(
                spec,
                label,
                engine,
                flags or [],
                run.path / "serve" / f"server-{k}.log",
                rounds,
                ready_timeout_s if engine == "transformers" else None,
            )
        run.append(step)
        done = latest([*done, step])
        emit({"event": "served", "step": step})
    order = [label for _, label, _, _ in plan]
    return sorted(done, key=lambda d: order.index(d.label) if d.label in order else len(order))


def latest(steps: list[ServeStep]) -> list[ServeStep]:
    """One record per variant, in the order first written: the last one written (a resumed run may measure an
    engine installed since)."""
    by_label: dict[str, ServeStep] = {}
    for s in steps:
        by_label[s.label] = s
    return list(by_label.values())


# --- the choice -------------------------------------------------------------------------------------------


class VariantComparison(BaseModel):
    """A served variant against the chosen one (measured): the ratio of their objectives and its band."""

    label: str
    ratio: float  # this variant's objective / the chosen one's
    noise: float | None  # the ratio's band: the two spreads added (None: a spread is missing)
    verdict: str  # chosen, clearly worse, within the spread, misses the SLOs, failed, not measured


def variant_gain(objective: Objective, a: ServeStep, b: ServeStep) -> tuple[float, float | None]:
    """How much better b is than a (positive: better), and the band it is judged against. Both were measured."""
    if a.objective is None or b.objective is None:
        raise ValueError("a variant without an objective cannot be compared")
    delta = b.objective / a.objective - 1
    g = delta if objective == "throughput" else -delta
    if objective == "memory":  # one reading per server; memory barely moves run to run
        return g, 0.0
    if a.spread is None or b.spread is None:
        return g, None
    return g, a.spread + b.spread


def clearly_better(objective: Objective, a: ServeStep, b: ServeStep) -> bool:
    g, noise = variant_gain(objective, a, b)
    return noise is not None and g > noise and g >= MIN_GAIN


def choose(objective: Objective, served: list[ServeStep]) -> tuple[ServeStep | None, list[VariantComparison]]:
    """The variant to ship, and every variant against it. The first variant that meets the SLOs (the setup as
    accepted, when it does) is kept unless a later one meeting them is clearly better."""
    ok = [s for s in served if s.objective is not None and s.objective > 0 and not s.slo_missed]
    chosen: ServeStep | None = ok[0] if ok else None
    for s in ok[1:]:
        if chosen is not None and clearly_better(objective, chosen, s):
            chosen = s
    rows = []
    for s in served:
        if s.status == "not measured" or s.objective is None or not s.objective > 0:
            rows.append(
                VariantComparison(
                    label=s.label,
                    ratio=float("nan"),
                    noise=None,
                    verdict="not measured" if s.status == "not measured" else "failed",
                )
            )
            continue
        ratio = s.objective / chosen.objective if chosen and chosen.objective else float("nan")
        noise = variant_gain(objective, chosen, s)[1] if chosen and s is not chosen else None
        if s is chosen:
            verdict = "chosen"
        elif s.slo_missed:
            verdict = "misses the SLOs"
        elif chosen is not None and clearly_better(objective, s, chosen):
            verdict = "clearly worse"
        else:
            verdict = "within the spread of the chosen (inconclusive)"
        rows.append(VariantComparison(label=s.label, ratio=ratio, noise=noise, verdict=verdict))
    return chosen, rows


def best_served(objective: Objective, served: list[ServeStep]) -> ServeStep | None:
    return choose(objective, served)[0]
