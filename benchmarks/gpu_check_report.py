"""The arithmetic and the table of `gpu_check.py`: each row's expected/measured ratios, and the results file as
the markdown table for benchmarks/README.md (gpu_check.py writes it after every step; run alone, this re-renders a
results file, e.g. one a killed run left).

  python benchmarks/gpu_check_report.py OUT/gpu_check.json
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
from pathlib import Path


def json_lines(text: str) -> list[dict]:
    rows = []
    for line in text.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                rows.append(json.loads(line))
    return rows


def read_estimate(stdout: str, device: str) -> dict | None:
    """The estimate's speed and its memory in the measured convention (as advisor/predicted.compare counts it)."""
    try:
        e = json.loads(stdout)
    except ValueError:
        return None
    mem, x = e["memory"], e["speed"].get("expected") or {}
    alloc = mem["total_bytes"] - (0 if device == "cpu" else mem["overhead_bytes"] + mem["kv_growth_reserve_bytes"])
    return {
        "expected_ttft_s": x.get("ttft_s"),
        "expected_tpot_s": x.get("tpot_s"),
        "basis": x.get("basis"),
        "roofline_tpot_s": e["speed"]["tpot_s"],
        "peak_bytes": alloc,
        "total_bytes": mem["total_bytes"],
        "device": e["accelerator"]["name"],
    }


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def add_ratios(row: dict) -> None:
    m, e, c = row.get("measured"), row.get("estimate") or {}, row.get("calibrated") or {}
    if not m:
        return
    row["ratios"] = {
        "ttft": ratio(e.get("expected_ttft_s"), m["ttft_s"]),
        "tpot": ratio(e.get("expected_tpot_s"), m["tpot_s"]),
        "peak": ratio(e.get("peak_bytes"), m["peak_bytes"]),
        "ttft_calibrated": ratio(c.get("expected_ttft_s"), m["ttft_s"]),
        "tpot_calibrated": ratio(c.get("expected_tpot_s"), m["tpot_s"]),
        "device_memory": ratio(
            (row.get("measure_estimate") or {}).get("predicted_device_bytes"), m["device_process_bytes"]
        ),
    }


def fmt(x: float | None, unit: str = "ms") -> str:
    if x is None:
        return "-"
    return f"{x * 1e3:.1f}" if unit == "ms" else f"{x / 1e9:.2f}"


def two(q: dict, k: str) -> str:
    return f"{q[k]:.2f}" if q.get(k) is not None else "-"


HEADER = (
    "| cell | status | TTFT exp / meas ms | e/m | tpot exp / meas ms | e/m | tpot cal e/m | peak exp / meas GB | e/m "
    "| s |",
    "|---|---|---|---|---|---|---|---|---|---|",
)


def row_line(r: dict) -> str:
    e, m, q = r.get("estimate") or {}, r.get("measured") or {}, r.get("ratios") or {}
    ttft = f"{fmt(e.get('expected_ttft_s'))} / {fmt(m.get('ttft_s'))} | {two(q, 'ttft')}"
    tpot = f"{fmt(e.get('expected_tpot_s'))} / {fmt(m.get('tpot_s'))} | {two(q, 'tpot')} | {two(q, 'tpot_calibrated')}"
    peak = f"{fmt(e.get('peak_bytes'), 'GB')} / {fmt(m.get('peak_bytes'), 'GB')} | {two(q, 'peak')}"
    return f"| {r['id']} | {r['status']} | {ttft} | {tpot} | {peak} | {r.get('seconds', '-')} |"


def markdown(res: dict) -> str:
    env = res.get("environment", {})
    where = env.get("gpu") or env.get("nvidia_smi") or "cpu"
    lines = [
        f"GPU check {res['started']} ({res.get('elapsed_s', 0):.0f} s): {where}, torch {env.get('torch')} "
        f"(CUDA {env.get('cuda')}), transformers {env.get('transformers')}, infertune {env.get('infertune_commit')}; "
        "random weights; exp = `infertune estimate` (datasheet), cal = the same after the calibration, "
        "e/m = expected / measured; peak: allocated on CUDA, above the baseline on CPU",
        "",
        *HEADER,
        *(row_line(r) for r in res.get("cells", [])),
        "",
        *(f"- {k}: {v}" for k, v in (res.get("summary") or {}).items()),
    ]
    x, cal, tune = res.get("crosscheck") or {}, res.get("calibration") or {}, res.get("tune") or {}
    if x.get("status") == "ok":
        hand = f"hand loop {fmt(x['loop_ttft_s'])} ms TTFT, {fmt(x['loop_tpot_s'])} ms/token"
        whole = f"generate timed whole {fmt(x['generate_ttft_s'])} ms, {fmt(x['generate_tpot_s'])} ms/token"
        got = f"measure {fmt(x['measure_ttft_s'])} ms, {fmt(x['measure_tpot_s'])} ms/token"
        lines.append(f"- cross-check ({x['cell']}): {hand}; {whole}; {got}")
    elif x:
        lines.append(f"- cross-check: {x.get('status')} {(x.get('error') or x.get('why') or '')[:200]}")
    if cal:
        phases = ", ".join(f"{p['phase']} {p['seconds']:.1f} s" for p in cal.get("phases", []))
        got = cal.get("result") or {}
        said = f"step {got.get('step_s')}, layer {got.get('layer_s')}" if got else cal.get("tail", "")[-200:]
        lines.append(f"- calibration: {cal['status']} in {cal['seconds']:.1f} s ({phases}); {said}")
    if tune:
        steps = "; ".join(
            f"{s['technique']} {s['status']} tpot {fmt(s['tpot_s'])} ms {'kept' if s['accepted'] else 'dropped'}"
            for s in tune.get("steps", [])
        )
        why = steps or tune.get("why") or tune.get("tail", "")[-200:]
        lines.append(f"- tune: {tune['status']} in {tune.get('seconds', 0):.0f} s: {why}")
    return "\n".join(lines) + "\n"


def summarise(rows: list[dict]) -> dict:
    out = {}
    for k in ("ttft", "tpot", "peak", "tpot_calibrated"):
        vals = [r["ratios"][k] for r in rows if (r.get("ratios") or {}).get(k) is not None]
        if vals:
            within = sum(0.8 <= v <= 1.25 for v in vals)
            spread = f"{min(vals):.2f}-{max(vals):.2f}"
            out[f"{k} e/m"] = (
                f"median {statistics.median(vals):.2f}, {spread}, within 0.8-1.25x in {within} of {len(vals)}"
            )
    out["cells"] = ", ".join(
        f"{s} {sum(r['status'] == s for r in rows)}" for s in ("ok", "failed", "timeout", "skipped")
    )
    return out


def main() -> None:
    print(markdown(json.loads(Path(sys.argv[1]).read_text())))


if __name__ == "__main__":
    main()
