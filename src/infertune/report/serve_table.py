"""The serve stage in a tune report: every served variant (transformers serve both ways, each engine) on the
same load, with its start-up time and peak memory beside its throughput and latency percentiles, the verdict
against the chosen one, and the serving-engine move's measured evidence. All of it measured, except the rows
of engines that were not installed, which say so and how to install them."""

from __future__ import annotations

import math
from typing import Any

from infertune.techniques.serving import ServingEngine
from infertune.tuning.run import ServeStep
from infertune.tuning.serve_stage import VariantComparison


def _median_level(v: ServeStep, concurrency: int) -> dict[str, Any] | None:
    if v.trial is None:
        return None
    level = next((lv for lv in v.trial.load.levels if lv.concurrency == concurrency), v.trial.load.levels[-1])
    return level.model_dump(mode="json")


def row(v: ServeStep, model: str, concurrency: int, cmp: VariantComparison, chosen: bool) -> dict[str, Any]:
    r: dict[str, Any] = {
        "label": v.label,
        "engine": v.engine,
        "flags": v.flags,
        "status": v.status,
        "objective": v.objective,
        "rounds": v.rounds,
        "spread": v.spread,
        "slo_missed": v.slo_missed,
        "chosen": chosen,
        "ratio_to_chosen": None if math.isnan(cmp.ratio) else cmp.ratio,
        "band": cmp.noise,
        "verdict": cmp.verdict,
        "error": v.error,
        "install": v.install,
        "startup_s": None,
        "peak_memory_bytes": None,
    }
    if v.trial:
        t = v.trial
        r.update(
            command=t.shell(model),
            log=t.log,
            startup_s=t.startup_s,
            peak_memory_bytes=t.peak_memory_bytes or t.server_peak_rss_bytes,
            server_peak_rss_bytes=t.server_peak_rss_bytes,
            at_concurrency=_median_level(v, concurrency),
            levels=[lv.model_dump(mode="json") for lv in t.load.levels],
        )
    return r


def engine_evidence(rows: list[dict[str, Any]], objective: str, concurrency: int) -> list[dict[str, Any]]:
    """Each measured engine against the best measured transformers serve variant, on the same load (measured):
    the ratios the advisor's serving-engine move carries."""
    ok = [r for r in rows if r["status"] == "ok" and r.get("at_concurrency")]
    base = [r for r in ok if r["engine"] == "transformers"]
    if not base:
        return []

    def tps(r: dict[str, Any]) -> float:
        return r["at_concurrency"]["output_tokens_per_s"]

    ref = max(base, key=tps)
    out = []
    for r in ok:
        if r["engine"] == "transformers":
            continue
        a, b = r["at_concurrency"], ref["at_concurrency"]
        band = (r["spread"] + ref["spread"]) if r["spread"] is not None and ref["spread"] is not None else None
        ratio = r["objective"] / ref["objective"] if r["objective"] and ref["objective"] else None
        gain = None if ratio is None else (ratio - 1 if objective == "throughput" else 1 - ratio)
        out.append(
            {
                "kind": "measured",
                "technique": ServingEngine.id,
                "engine": r["engine"],
                "against": ref["label"],
                "concurrency": concurrency,
                "objective": objective,
                "objective_ratio": ratio,
                "band": band,
                "clear": bool(gain is not None and band is not None and abs(gain) > band),
                "better": bool(gain is not None and band is not None and gain > band),
                "throughput_ratio": tps(r) / tps(ref) if tps(ref) else None,
                "ttft_p50_ratio": (a["ttft_s"]["p50"] / b["ttft_s"]["p50"])
                if a["ttft_s"]["p50"] and b["ttft_s"]["p50"]
                else None,
                "startup_s": r["startup_s"],
                "peak_memory_bytes": r["peak_memory_bytes"],
                "reference_startup_s": ref["startup_s"],
                "reference_peak_memory_bytes": ref["peak_memory_bytes"],
                "chosen": r["chosen"],
            }
        )
    return out
