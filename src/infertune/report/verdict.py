"""What a tune report says first: the configuration to ship, what it gains against the baseline (measured,
with its noise band), what it costs, and how sure we are. Read from report.json alone, so `report.md`,
`report.html` and a rebuilt report say the same thing.

Steps may carry `verdict`, `delta` and `noise` (noise-aware tuning) and the environment `busy` and
`load_average`; without them the verdict is derived from `accepted` and the status, the delta from the
objective, and the report says that no noise band was measured."""

from __future__ import annotations

import statistics
from typing import Any

from infertune.core import human

VERDICTS = ("baseline", "kept", "rejected", "inconclusive", "failed")
SMALLER_IS_BETTER = {"latency": True, "memory": True, "throughput": False}


def step_verdict(s: dict[str, Any]) -> str:
    """kept, rejected, inconclusive, failed (the trial did not finish) or baseline."""
    if s["measured"].get("status") != "ok":
        return "failed"
    if s["technique"] is None:
        return "baseline"
    v = s.get("verdict")
    if v in VERDICTS:
        return v
    return "kept" if s["accepted"] else "rejected"


def step_deltas(r: dict[str, Any]) -> list[float | None]:
    """Each step's relative change of the objective against the configuration it challenged (the best
    kept so far): the run's own `delta` when present, else computed from the measured objectives."""
    out: list[float | None] = []
    incumbent: float | None = None
    for s in r["steps"]:
        mine = s.get("objective")
        if "delta" in s:
            out.append(s["delta"])
        elif s["technique"] is None or mine is None or not incumbent:
            out.append(None)
        else:
            out.append(mine / incumbent - 1)
        if s["accepted"] and mine is not None:
            incumbent = mine
    return out


def _metric_rows(base: dict, best: dict) -> list[dict[str, Any]]:
    """Baseline vs shipped, measured: (name, before, after, relative change, better?)."""
    rows = []
    for name, key, fmt, smaller in (
        ("end-to-end latency (mean)", "e2e_s", human.duration, True),
        ("time to first token (mean)", "ttft_s", human.duration, True),
        ("time per output token (mean)", "tpot_s", human.duration, True),
        ("throughput", "tokens_per_s", human.rate, False),
        ("peak memory", "peak_memory_bytes", human.size, True),
        ("peak above the process baseline", "peak_above_baseline_bytes", human.size, True),
    ):
        a, b = base.get(key), best.get(key)
        if a is None or b is None:
            continue
        rel = b / a - 1 if a else None
        same = rel is not None and abs(rel) < 0.005
        rows.append(
            {
                "metric": name,
                "baseline": fmt(a),
                "shipped": fmt(b),
                "change": "unchanged" if same else human.change(rel),
                "better": None if rel is None or abs(rel) < 0.005 else (rel < 0) == smaller,
            }
        )
    return rows


def environment_facts(env: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The machine the numbers come from, as (label, text) pairs."""
    if not env or ("error" in env and len(env) == 1):
        return [("machine", "not recorded")]
    hw = env.get("hardware") or {}
    libs = env.get("libraries") or {}
    facts = []
    if hw:
        cores = f"{hw.get('cpu_logical_cores', '?')} logical cores"
        facts.append(("CPU", f"{hw.get('cpu_model') or 'unknown'} ({cores})"))
        facts.append(
            (
                "RAM",
                f"{human.size(hw.get('ram_total_bytes'))} total, "
                f"{human.size(hw.get('ram_available_bytes'))} available at the start",
            )
        )
        for g in hw.get("gpus") or []:
            facts.append((f"GPU {g['index']}", f"{g['name']}, {human.size(g['total_memory_bytes'])}"))
        if not hw.get("gpus"):
            facts.append(("GPU", "none"))
    if libs:
        shown = ", ".join(f"{k} {v}" for k, v in libs.items() if v)
        facts.append(("libraries", shown or "none recorded"))
    if env.get("python"):
        facts.append(("Python", str(env["python"])))
    if env.get("torch_threads"):
        facts.append(("torch threads", str(env["torch_threads"])))
    load = env.get("load_average")
    if load is not None:
        la = ", ".join(human.number(float(x)) for x in load) if isinstance(load, (list, tuple)) else human.number(load)
        facts.append(("load average", la + (" (busy: other work shared the machine)" if env.get("busy") else "")))
    return facts


def summary(r: dict[str, Any]) -> dict[str, Any]:
    """The verdict: `ship` (settings text, None to keep the baseline), `headline`, `rows` (baseline vs
    shipped, measured), `noise`, `costs`, `sure` ('high' | 'moderate' | 'low') and `why_sure`."""
    steps, best = r["steps"], r.get("best")
    obj = r["objective"]
    if not steps or best is None:
        return {
            "ship": None,
            "headline": "No configuration to ship: no trial finished.",
            "rows": [],
            "noise": None,
            "costs": [],
            "sure": "low",
            "why_sure": ["no finished trial"],
        }
    base = steps[0]
    shipped = next(s for s in steps if s["index"] == best["index"])
    changes: dict[str, Any] = {}
    for s in steps[: steps.index(shipped) + 1]:
        if s["accepted"] and s["technique"]:
            changes.update(s["changes"] or {})
    rows = _metric_rows(base["measured"], shipped["measured"])
    gain = None
    if base.get("objective") and shipped.get("objective") is not None:
        gain = shipped["objective"] / base["objective"] - 1
    noise = shipped.get("noise")
    before, after = base.get("objective"), shipped.get("objective")
    confirmed = r.get("confirmation")
    if confirmed and confirmed.get("winner") == shipped["index"] and confirmed.get("delta") is not None:
        # the fresh pairs at the end, not the draw that made the pick win
        gain, noise = confirmed["delta"], confirmed.get("noise")
        before = statistics.median(p["incumbent"] for p in confirmed["pairs"])
        after = statistics.median(p["candidate"] for p in confirmed["pairs"])
    what = human.OBJECTIVE.get(obj, obj)
    if not changes:
        headline = (
            f"Keep the baseline: no change improved {what} "
            f"({human.objective(obj, base.get('objective'))}, measured) by more than the noise."
        )
    else:
        band = f", noise band ±{human.share(noise)}" if noise is not None else ""
        fresh = confirmed if confirmed and confirmed.get("winner") == shipped["index"] else None  # of this pick
        how = (
            f"paired against the baseline in {len(fresh['pairs'])} fresh pairs at the end ({fresh['outcome']})"
            if fresh
            else "against the baseline"
        )
        tie = fresh.get("tie") if fresh and fresh.get("verdict") != "kept" else None
        if tie and tie.get("clear"):  # adopted for the other axis: say so first, the objective a tie beside it
            axis = "peak memory above the process baseline" if obj != "memory" else "end-to-end latency"
            headline = (
                f"Ship {human.settings(changes)}: {axis} {human.change(tie['delta'])} at the same {what} within its "
                f"noise ({human.objective(obj, before)} → {human.objective(obj, after)}, {human.change(gain)}{band}), "
                f"measured {how} on this machine."
            )
        else:
            headline = (
                f"Ship {human.settings(changes)}: {what} {human.objective(obj, before)} → "
                f"{human.objective(obj, after)} ({human.change(gain)}{band}), measured "
                f"{how} on this machine."
            )
    costs = [f"{x['metric']} {x['baseline']} → {x['shipped']} ({x['change']})" for x in rows if x["better"] is False]
    q = shipped.get("quality") or {}
    if q:
        nll = q.get("nll_delta")
        costs.append(
            f"quality: greedy outputs match the baseline on {human.share(q.get('exact_match_rate'))} of the "
            "prompts"
            + (f"; reference NLL {nll:+.3f} nats/token" if nll is not None else "")
            + (f"; largest next-token KL {human.number(q['max_kl'])} nats" if q.get("max_kl") is not None else "")
        )
    costs += list(r.get("tradeoffs") or [])
    sure, why = _certainty(r, shipped, gain, noise)
    return {
        "ship": human.settings(changes) if changes else None,
        "headline": headline,
        "rows": rows,
        "noise": noise,
        "costs": costs,
        "sure": sure,
        "why_sure": why,
    }


def _certainty(r: dict[str, Any], shipped: dict, gain: float | None, noise: float | None) -> tuple[str, list[str]]:
    env = r.get("environment") or {}
    w = r["workload"]
    reps = w.get("repeats", 1)
    why = [
        f"each step is the mean of {reps} timed pass{'es' * (reps != 1)} over the prompts "
        f"(warm-up {w.get('warmup', 0)} untimed)"
    ]
    verdicts = [step_verdict(s) for s in r["steps"]]
    level = "moderate"
    if noise is None and not any("noise" in s for s in r["steps"]):
        why.append(
            "no noise band was measured: each configuration ran once, so a difference of a few percent "
            "may be run-to-run noise; re-validate with the command below"
        )
    elif gain is not None and noise is not None and abs(gain) > 2 * noise:
        level = "high"
        why.append(f"the gain ({human.change(gain)}) is more than twice its noise band (±{human.share(noise)})")
    confirmed = r.get("confirmation")
    if confirmed and confirmed.get("winner") == shipped["index"]:
        why.append(f"end-of-run confirmation: {confirmed['outcome']} ({confirmed.get('stopped') or ''})")
        if confirmed["outcome"] != "confirmed":
            level = "low"
    if "inconclusive" in verdicts:
        n = verdicts.count("inconclusive")
        why.append(f"{n} step{'s' * (n != 1)} stayed inconclusive: the difference was inside the noise")
    if env.get("busy"):
        level = "low"
        why.append(
            "the machine was busy while measuring (other work shared it): absolute numbers are pessimistic "
            "and differences noisier"
        )
    if shipped["measured"].get("status") != "ok" or step_verdict(shipped) == "inconclusive":
        level = "low"
    q = shipped.get("quality")
    if q and q.get("passed") is False:
        level = "low"
    elif q:
        why.append("quality held against the baseline (greedy outputs and reference NLL)")
    return level, why


def workload_text(w: dict[str, Any]) -> str:
    """The workload in one sentence."""
    n = len(w.get("prompts") or [])
    prompts = f"{n} prompt{'s' * (n != 1)}" if n else "the built-in chat set (4 prompts)"
    if w.get("input_lens"):
        length = "prompts padded to " + ", ".join(f"{x:,}" for x in w["input_lens"]) + " tokens"
    elif w.get("input_len"):
        length = f"prompts padded to {w['input_len']:,} tokens"
    else:
        length = "prompts at their natural length"
    return (
        f"{prompts}, {length}, {w['max_new_tokens']:,} new tokens each, batch {w['batch']}, "
        f"concurrency {w['concurrency']}, {'sampled' if w.get('do_sample') else 'greedy'}"
    )


def step_rows(r: dict[str, Any]) -> list[dict[str, str]]:
    """The steps as text cells, measured and estimated apart: what both the page and report.md show."""
    rows = []
    obj = r["objective"]
    for s, delta in zip(r["steps"], step_deltas(r), strict=True):
        m, q, e = s["measured"], s.get("quality") or {}, s.get("expected")
        expected = "-"
        if e:
            expected = (
                f"peak {human.size(e['peak_bytes_before'])} → {human.size(e['peak_bytes_after'])}, "
                f"time/token {human.duration(e['tpot_s_before'])} → {human.duration(e['tpot_s_after'])}"
            )
            if m.get("tpot_s"):
                expected += (
                    f"; measured {human.duration(m['tpot_s'])}, expected/measured {e['tpot_s_after'] / m['tpot_s']:.2f}"
                )
        rows.append(
            {
                "index": str(s["index"]),
                "change": human.settings(s["changes"]) if s["technique"] else "baseline",
                "technique": s["technique"] or "baseline",
                "verdict": step_verdict(s),
                "objective": human.objective(obj, s.get("objective")) if s.get("objective") is not None else "-",
                "delta": human.change(delta),
                "noise": f"±{human.share(s['noise'])}" if s.get("noise") is not None else "-",
                "pairs": str(s.get("repeats", 1)),
                "busy": "busy" if s.get("busy") else "",
                "stopped": s.get("stopped") or "",
                "peak": human.size(m.get("peak_memory_bytes")),
                "ttft": human.duration(m.get("ttft_s")),
                "tpot": human.duration(m.get("tpot_s")),
                "tps": human.rate(m.get("tokens_per_s"), "tok/s"),
                "match": human.share(q.get("exact_match_rate")) if q else "-",
                "nll": f"{q['nll_delta']:+.3f}" if q.get("nll_delta") is not None else "-",
                "expected": expected,
                "note": (e or {}).get("note") or "",
                "why": s["reason"] if m.get("status") == "ok" else f"{m.get('status')}: {s['reason']}",
            }
        )
    return rows
