"""report.md: the tune report as text, in the order a person reads it: the verdict, the steps, the code to
ship, what was not verified, the machine. Measured numbers and *estimates* are labelled apart."""

from __future__ import annotations

from typing import Any

from infertune.core import human
from infertune.report.verdict import environment_facts, step_rows, summary, workload_text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)] + [
        "| " + " | ".join(_cell(c) for c in row) + " |" for row in rows
    ]


def markdown(r: dict[str, Any]) -> str:
    v = summary(r)
    lines = [
        f"# infertune tune report: {r['model']}",
        "",
        f"Objective: **{human.OBJECTIVE.get(r['objective'], r['objective'])}**. "
        f"Workload: {workload_text(r['workload'])}. Numbers marked *measured* come from trials on this machine; "
        "*estimate* numbers come from the estimator.",
        "",
        "## Verdict",
        "",
        f"**{v['headline']}**",
        "",
    ]
    if v["rows"]:
        lines += [
            *_table(
                ["measured", "baseline", "shipped", "change"],
                [[x["metric"], x["baseline"], x["shipped"], x["change"]] for x in v["rows"]],
            ),
            "",
        ]
    if v["costs"]:
        lines += ["What it costs:", ""] + [f"- {c}" for c in v["costs"]] + [""]
    lines += [f"How sure: **{v['sure']}**", ""] + [f"- {w}" for w in v["why_sure"]] + [""]

    rows = step_rows(r)
    lines += ["## Steps (measured)", ""]
    env = r.get("environment") or {}
    if env.get("busy"):
        lines += [
            f"**The machine was busy while these trials ran** ({'; '.join(env.get('busy_reasons') or [])}): "
            "timings swing with other work, so differences are judged against the noise the interleaved "
            "repeats measured; inconclusive steps may be decided on a quiet machine.",
            "",
        ]
    lines += [
        'Each candidate was measured against the incumbent in interleaved pairs; "vs incumbent" is the '
        'median paired change of the objective, "noise" the half-width of its band (docs/tuning.md); the '
        "trial columns show the candidate's first trial.",
        "",
    ]
    lines += _table(
        [
            "#",
            "change",
            "verdict",
            r["objective"],
            "vs incumbent",
            "noise",
            "pairs",
            "peak memory",
            "TTFT",
            "time/token",
            "tokens/s",
            "exact match",
            "NLL delta",
            "why",
        ],
        [
            [
                x["index"],
                x["change"],
                x["verdict"],
                x["objective"],
                x["delta"],
                x["noise"],
                (x["pairs"] + " " + x["busy"]).strip(),
                x["peak"],
                x["ttft"],
                x["tpot"],
                x["tps"],
                x["match"],
                x["nll"],
                x["why"],
            ]
            for x in rows
        ],
    )
    stops = [x for x in rows if x["stopped"]]
    if stops:  # under the table, not in it: the table stays readable at 1280 px
        lines += ["", "How each step stopped:", ""] + [f"- step {x['index']}: {x['stopped']}" for x in stops]
    if c := r.get("confirmation"):
        lines += ["", f"Confirmed at the end (measured): {c['reason']} ({c['stopped']})."]
    expected = [x for x in rows if x["expected"] != "-"]
    if expected:
        lines += ["", "Each change was chosen on an estimate (before → after, *estimate*, not measured):", ""]
        lines += [
            f"- step {x['index']} `{x['technique']}`: {x['expected']} (estimate"
            + (f"; {x['note']}" if x["note"] else "")
            + ")"
            for x in expected
        ]
    lines.append("")

    b = r.get("best")
    if b:
        lines += [
            "## The configuration to ship",
            "",
            "Python (loads and generates exactly as the trial did):",
            "",
            "```python",
            b["python"].rstrip(),
            "```",
            "",
            "Serve it"
            + (
                " (the served variant measured best in this run, below):"
                if b.get("serve_measured")
                else " with transformers serve (not load-tested in this run: unverified):"
            ),
            "",
            "```bash",
            b["serve"],
            "```",
            "",
        ]
        if b.get("engine"):
            lines += [
                "The same configuration on a dedicated engine (not run here: unverified):",
                "",
                "```bash",
                b["engine"],
                "```",
                "",
            ]
        if b.get("greedy_output_prompt_0") is not None:
            lines += [f"Greedy output for prompt 0 (measured): `{b['greedy_output_prompt_0']}`", ""]
        lines += [f"Re-validate on the same workload: `{b['validate']}`", ""]
    if r.get("served"):
        lines += _served(r)
    if r.get("unverified") or r.get("open_questions"):
        lines += ["## Not verified in this run", ""]
        lines += [f"- `{u['technique']}`: {u['why']}" for u in r.get("unverified") or []]
        lines += [f"- open question: {q}" for q in r.get("open_questions") or []] + [""]
    if r.get("docs"):
        lines += ["## Documentation", ""] + [f"- {d}" for d in r["docs"]] + [""]
    lines += ["## Environment (measured on)", ""] + [f"- {k}: {t}" for k, t in environment_facts(r.get("environment"))]
    lines.append("")
    if r.get("warnings"):
        lines += ["## Warnings", ""] + [f"- {x}" for x in r["warnings"]] + [""]
    return "\n".join(lines)


def served_rows(r: dict[str, Any]) -> list[list[str]]:
    """Every served variant as text cells: measured ones with start-up, peak memory, percentiles, throughput
    and the verdict against the chosen one; an engine that is not installed says how to install it."""

    def pct(p: dict) -> str:
        return " / ".join(human.duration(p[k]) for k in ("p50", "p95", "p99"))

    rows = []
    for v in r["served"]:
        name = f"{v['label']}: {' '.join(v['flags']) or 'no flags'}"
        if v["status"] == "not measured":
            rows.append([name, "not measured", "", "", "", "", "", "", f"{v['error']}: {v['install']}"])
            continue
        if v["status"] != "ok":
            rows.append([name, "failed", "", "", "", "", "", "", v["error"] or ""])
            continue
        lv = v["at_concurrency"]
        vs = (
            "-"
            if v.get("ratio_to_chosen") is None
            else f"{v['ratio_to_chosen']:.2f}x" + (f" ± {human.share(v['band'])}" if v.get("band") is not None else "")
        )
        verdict = v["verdict"] + (f" ({'; '.join(v['slo_missed'])})" if v.get("slo_missed") else "")
        rows.append(
            [
                name,
                human.duration(v.get("startup_s")),
                human.size(v.get("peak_memory_bytes")),
                pct(lv["ttft_s"]),
                pct(lv["itl_s"]),
                human.duration(lv["e2e_s"]["p50"]),
                human.rate(lv["output_tokens_per_s"], "tok/s"),
                vs,
                verdict,
            ]
        )
    return rows


SERVED_HEADERS = [
    "variant",
    "start-up",
    "peak memory (all processes)",
    "TTFT p50 / p95 / p99",
    "ITL p50 / p95 / p99",
    "end-to-end p50",
    "throughput",
    "vs chosen",
    "verdict",
]


def _served(r: dict[str, Any]) -> list[str]:
    from infertune.techniques.base import EngineEvidence

    conc = r["workload"]["concurrency"]
    lines = [
        f"## Served (measured at concurrency {conc}, the same requests for every server: the workload's "
        "prompts at their natural length)",
        "",
        f"Each server's {r['objective']} is the median of its rounds at concurrency {conc}; a variant replaces the "
        "simpler one only when the ratio clears both spreads added (docs/tuning.md).",
        "",
    ]
    lines += [*_table(SERVED_HEADERS, served_rows(r)), ""]
    if r.get("serve_decision"):
        lines += [f"Decision: {r['serve_decision']}.", ""]
    if r.get("serving_engine"):
        lines += ["Serving-engine move, measured on this workload:", ""]
        lines += [f"- {EngineEvidence.model_validate(e).line()}" for e in r["serving_engine"]] + [""]
    return lines
