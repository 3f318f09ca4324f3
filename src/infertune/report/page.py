"""report.html: one self-contained page read top-down. The title and the workload; the verdict (what to
ship, what it gains, measured, with its noise band, what it costs, how sure we are); the steps as a table;
the charts; the code to ship in copyable blocks; what was not verified; the machine. Estimates are blue
and italic under an "estimate" tag, measurements black under a "measured" tag."""

from __future__ import annotations

from typing import Any

from infertune.core import human
from infertune.report.charts import tune_charts
from infertune.report.markdown import SERVED_HEADERS, served_rows
from infertune.report.style import bullets, code, document, esc, facts, figure, inline, table, tag
from infertune.report.verdict import environment_facts, step_rows, summary, workload_text


def _verdict(r: dict[str, Any]) -> str:
    v = summary(r)
    parts = [f"<p class='headline'>{tag('measured')} {esc(v['headline'])}</p>"]
    if v["rows"]:
        rows = []
        for x in v["rows"]:
            mark = "" if x["better"] is None else (" class='better'" if x["better"] else " class='worse'")
            rows.append(
                [esc(x["metric"]), esc(x["baseline"]), esc(x["shipped"]), f"<span{mark}>{esc(x['change'])}</span>"]
            )
        parts.append(table(["measured", "baseline", "shipped", "change"], rows, num={1, 2, 3}, raw={0, 1, 2, 3}))
    if v["costs"]:
        parts.append("<h3>What it costs</h3>" + bullets(v["costs"]))
    parts.append(
        f"<h3>How sure <span class='sure {esc(v['sure'])}'>{esc(v['sure'])}</span></h3>" + bullets(v["why_sure"])
    )
    keep = " keep" if v["ship"] is None else ""
    return f"<section id='verdict' class='verdict{keep}'><h2>Verdict</h2>{''.join(parts)}</section>"


def _steps(r: dict[str, Any]) -> str:
    rows = step_rows(r)
    headers = [
        "#",
        "step",
        "verdict",
        f"{r['objective']}",
        "vs incumbent",
        "TTFT",
        "time/token",
        "tokens/s",
        "peak memory",
        "quality",
        "why",
    ]
    cells = []
    for x in rows:
        step = f"<b>{esc(x['change'])}</b>"
        if x["expected"] != "-":
            step += (
                f"<br><span class='est'>{tag('estimate')} {esc(x['expected'])}"
                + (f"; {esc(x['note'])}" if x["note"] else "")
                + "</span>"
            )
        delta = esc(x["delta"]) + (
            f"<br><small>noise {esc(x['noise'])}, {esc(x['pairs'])} pairs {esc(x['busy'])}</small>"
            if x["noise"] != "-"
            else ""
        )
        quality = "-" if x["match"] == "-" else f"{esc(x['match'])} match<br><small>NLL {esc(x['nll'])}</small>"
        cells.append(
            [
                esc(x["index"]),
                step,
                tag(x["verdict"]),
                esc(x["objective"]),
                delta,
                esc(x["ttft"]),
                esc(x["tpot"]),
                esc(x["tps"]),
                esc(x["peak"]),
                quality,
                inline(x["why"]),
            ]
        )
    legend = (
        "<p class='legend'>All numbers measured on this machine except the "
        f"{tag('estimate')} lines, the estimate each step was chosen on. kept: beat the best so far with quality "
        "held; rejected: did not, or broke quality or a constraint; inconclusive: the difference was inside "
        "the noise; failed: the trial did not finish. vs incumbent: change of the objective against the best "
        "configuration kept before that step. Quality: greedy outputs equal to the baseline's, and the change "
        "of the reference NLL (nats/token).</p>"
    )
    stops = [f"step {x['index']}: {x['stopped']}" for x in rows if x.get("stopped")]
    stopped = "<h3>How each step stopped</h3>" + bullets(stops) if stops else ""
    if c := r.get("confirmation"):
        stopped += "<h3>Confirmed at the end</h3>" + bullets([f"{c['reason']} ({c['stopped']})"])
    return (
        "<section id='steps'><h2>Steps</h2>"
        + table(headers, cells, num={0, 3, 4, 5, 6, 7, 8, 9}, raw=set(range(11)), cls={1: "step", 10: "why"})
        + stopped
        + legend
        + "</section>"
    )


def _code(r: dict[str, Any]) -> str:
    b = r.get("best")
    if not b:
        return ""
    parts = [code(b["python"], "Python: loads and generates exactly as the trial did", "python")]
    served = (
        "measured in this run (see the served table)"
        if b.get("serve_measured")
        else "not load-tested in this run: unverified"
    )
    parts.append(code(b["serve"], f"Serve it ({served})", "bash"))
    if b.get("engine"):
        parts.append(
            code(b["engine"], "The same configuration on a dedicated engine (not run here: unverified)", "bash")
        )
    parts.append(code(b["validate"], "Re-validate on the same workload", "bash"))
    if b.get("greedy_output_prompt_0") is not None:
        parts.append(
            f"<p>{tag('measured')} Greedy output for prompt 0: <code>{esc(b['greedy_output_prompt_0'])}</code></p>"
        )
    return "<section id='ship'><h2>The configuration to ship</h2>" + "".join(parts) + "</section>"


def _served(r: dict[str, Any]) -> str:
    if not r.get("served"):
        return ""
    decision = f"<p><b>Decision:</b> {esc(r['serve_decision'])}.</p>" if r.get("serve_decision") else ""
    return (
        f"<section id='served'><h2>Served {tag('measured')}</h2>"
        f"<p>At concurrency {r['workload']['concurrency']}, the same requests for every server (the workload's "
        "prompts at their natural length); each figure is the median of the server's rounds.</p>"
        + table(SERVED_HEADERS, served_rows(r), num={1, 2, 3, 4, 5, 6, 7})
        + decision
        + "</section>"
    )


def _unverified(r: dict[str, Any]) -> str:
    items = [f"<code>{esc(u['technique'])}</code>: {inline(u['why'])}" for u in r.get("unverified") or []]
    items += [f"open question: {inline(q)}" for q in r.get("open_questions") or []]
    if not items:
        return ""
    return "<section id='unverified'><h2>Not verified in this run</h2>" + bullets(items, raw=True) + "</section>"


def tune_page(r: dict[str, Any]) -> str:
    charts = tune_charts(r)
    head = (
        f"<h1>infertune: {esc(r['model'])}</h1><p class='sub'>Tuned for "
        f"<b>{esc(human.OBJECTIVE.get(r['objective'], r['objective']))}</b> on {esc(workload_text(r['workload']))}."
        f" {tag('measured')} trials on this machine; {tag('estimate')} the estimator's prediction.</p>"
    )
    body = head + _verdict(r) + _steps(r)
    body += "<section id='charts'><h2>Charts</h2>" + "".join(figure(*c) for c in charts) + "</section>"
    body += _code(r) + _served(r) + _unverified(r)
    if r.get("docs"):
        body += "<section id='docs'><h2>Documentation</h2>" + bullets(r["docs"]) + "</section>"
    body += (
        "<section id='environment'><h2>Measured on</h2>" + facts(environment_facts(r.get("environment"))) + "</section>"
    )
    if r.get("warnings"):
        body += "<section id='warnings'><h2>Warnings</h2>" + bullets(r["warnings"]) + "</section>"
    return document(f"infertune report: {r['model']}", body)
