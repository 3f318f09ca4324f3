"""report.md: the tune report as text, in the order a person reads it: the verdict, the steps, the code to
ship, what was not verified, the machine. Measured numbers and *estimates* are labelled apart."""

from __future__ import annotations

from typing import Any

from infertune import human
from infertune.report.verdict import environment_facts, step_rows, summary, workload_text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
            + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows])


def markdown(r: dict[str, Any]) -> str:
    v = summary(r)
    lines = [f"# infertune tune report: {r['model']}", "",
             f"Objective: **{human.OBJECTIVE.get(r['objective'], r['objective'])}**. "
             f"Workload: {workload_text(r['workload'])}. Numbers marked *measured* come from trials on this machine; "
             "*estimate* numbers come from the estimator.", "",
             "## Verdict", "", f"**{v['headline']}**", ""]
    if v["rows"]:
        lines += _table(["measured", "baseline", "shipped", "change"],
                        [[x["metric"], x["baseline"], x["shipped"], x["change"]] for x in v["rows"]]) + [""]
    if v["costs"]:
        lines += ["What it costs:", ""] + [f"- {c}" for c in v["costs"]] + [""]
    lines += [f"How sure: **{v['sure']}**", ""] + [f"- {w}" for w in v["why_sure"]] + [""]

    rows = step_rows(r)
    lines += ["## Steps (measured)", ""]
    env = r.get("environment") or {}
    if env.get("busy"):
        lines += [f"**The machine was busy while these trials ran** ({'; '.join(env.get('busy_reasons') or [])}): "
                  "timings swing with other work, so differences are judged against the noise the interleaved "
                  "repeats measured; inconclusive steps may be decided on a quiet machine.", ""]
    lines += ["Each candidate was measured against the incumbent in interleaved pairs; \"vs incumbent\" is the "
              "median paired change of the objective, \"noise\" the half-width of its band (docs/tuning.md); the "
              "trial columns show the candidate's first trial.", ""]
    lines += _table(["#", "change", "verdict", r["objective"], "vs incumbent", "noise", "pairs", "peak memory", "TTFT",
                     "time/token", "tokens/s", "exact match", "NLL delta", "why"],
                    [[x["index"], x["change"], x["verdict"], x["objective"], x["delta"], x["noise"], (x["pairs"] + " " + x["busy"]).strip(), x["peak"],
                      x["ttft"], x["tpot"], x["tps"], x["match"], x["nll"], x["why"]] for x in rows])
    expected = [x for x in rows if x["expected"] != "-"]
    if expected:
        lines += ["", "Each change was chosen on an estimate (before → after, *estimate*, not measured):", ""]
        lines += [f"- step {x['index']} `{x['technique']}`: {x['expected']} (estimate"
                  + (f"; {x['note']}" if x["note"] else "") + ")" for x in expected]
    lines.append("")

    b = r.get("best")
    if b:
        lines += ["## The configuration to ship", "", "Python (loads and generates exactly as the trial did):", "",
                  "```python", b["python"].rstrip(), "```", "",
                  "Serve it with transformers serve" + (" (measured best in this run, below):" if b.get("serve_measured")
                                                        else " (not load-tested in this run: unverified):"), "",
                  "```bash", b["serve"], "```", ""]
        if b.get("engine"):
            lines += ["The same configuration on a dedicated engine (not run here: unverified):", "",
                      "```bash", b["engine"], "```", ""]
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
    def pct(p: dict) -> str:
        return " / ".join(human.duration(p[k]) for k in ("p50", "p95", "p99"))

    rows = []
    for v in r["served"]:
        name = f"{v['label']}: {' '.join(v['flags']) or 'no flags'}"
        if v["status"] != "ok":
            rows.append([name, f"failed: {v['error']}", "", "", "", "", "", ""])
            continue
        lv = v["at_concurrency"]
        rows.append([name, pct(lv["ttft_s"]), pct(lv["itl_s"]), human.duration(lv["e2e_s"]["p50"]),
                     human.rate(lv["output_tokens_per_s"], "tok/s"), human.rate(lv["requests_per_s"], "req/s"),
                     human.size(v["server_peak_rss_bytes"]), "yes" if v["chosen"] else ""])
    return rows


SERVED_HEADERS = ["variant", "TTFT p50 / p95 / p99", "ITL p50 / p95 / p99", "end-to-end p50", "throughput",
                  "requests", "server peak RSS", "chosen"]


def _served(r: dict[str, Any]) -> list[str]:
    conc = r["workload"]["concurrency"]
    return ([f"## Served with transformers serve (measured at concurrency {conc}, the workload's prompts at their "
             "natural length)", ""] + _table(SERVED_HEADERS, served_rows(r)) + [""])
