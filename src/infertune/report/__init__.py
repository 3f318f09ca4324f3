"""A tune run's report: report.json (for programs), report.md (for people), report.html (self-contained,
plots embedded). Measured numbers and estimates carry their labels; what was not run is "unverified"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infertune.measure.machine import combine
from infertune.models import command_name
from infertune.paths import write_atomic
from infertune.render import config_for, estimate_setup, serve_command
from infertune.report import served as serving
from infertune.report.render import html_page, png, pyplot
from infertune.schema import SCHEMA_VERSION
from infertune.served import ServeStep, choose, latest
from infertune.techniques import REGISTRY, Facts
from infertune.tune import Step, TuneSpec, best_step, measurable

MiB = 2**20


def reproduce_snippet(spec: TuneSpec, step: Step, bf16: bool) -> str:
    """Loads and generates exactly as the trial did for prompt 0 (greedy), printing its output."""
    wl = spec.workload
    prompt = wl.prompt_list()[0]
    gen: dict[str, Any] = {"do_sample": wl.do_sample}
    if not wl.do_sample:
        gen.update(temperature=None, top_p=None, top_k=None)
    if wl.ignore_eos:
        gen["min_new_tokens"] = wl.max_new_tokens
    return config_for(step.setup, bf16).python_snippet(
        spec.model_path, wl.max_new_tokens, prompt if isinstance(prompt, str) else [m.model_dump() for m in prompt],
        seed=wl.seed, generate=gen, tp=step.setup.tp)


def _metrics_row(s: Step) -> dict[str, Any]:
    m = s.trial.metrics
    if m is None:
        return {"status": s.trial.status}
    return {"status": s.trial.status, "peak_memory_bytes": m.peak_memory_bytes,
            "peak_above_baseline_bytes": m.peak_memory_bytes - m.baseline_memory_bytes, "memory_kind": m.memory_kind,
            "ttft_s": m.ttft_s, "tpot_s": m.tpot_s, "e2e_s": m.e2e_s, "tokens_per_s": m.tokens_per_s,
            "reference_nll": m.reference_nll, "concurrency": m.concurrency, "requests_per_s": m.requests_per_s,
            "ttft_percentiles_s": {"p50": m.ttft_p50_s, "p95": m.ttft_p95_s, "p99": m.ttft_p99_s},
            "tpot_percentiles_s": {"p50": m.tpot_p50_s, "p95": m.tpot_p95_s, "p99": m.tpot_p99_s}}


def _environment(steps: list[Step]) -> dict[str, Any] | None:
    """The baseline trial's environment, with how busy the machine was over every trial of the run."""
    if not steps:
        return None
    env = dict(steps[0].trial.environment or {})
    load = combine([s.machine or s.trial.machine for s in steps])
    env.update(busy=bool(load and load.busy), load_average=load.load_average if load else None,
               cores=load.cores if load else None, others_cpu=load.others_cpu if load else None,
               busy_reasons=load.reasons if load else [])
    return env


def _step_row(s: Step) -> dict[str, Any]:
    busy = (s.machine or s.trial.machine)
    return {"index": s.index, "technique": s.technique, "changes": s.changes, "accepted": s.accepted,
            "verdict": s.verdict, "delta": s.delta, "noise": s.noise, "reason": s.reason, "objective": s.objective,
            "repeats": len(s.pairs) if s.technique else 1, "busy": bool(busy and busy.busy),
            "pairs": [p.model_dump() for p in s.pairs], "tie": s.tie.model_dump() if s.tie else None,
            "measured": _metrics_row(s), "quality": s.quality.model_dump() if s.quality else None,
            "expected": s.expected.model_dump(mode="json") if s.expected else None}


def build(spec: TuneSpec, steps: list[Step], facts: Facts, warnings: list[str] | None = None,
          run_dir: Path | None = None, served: list[ServeStep] | None = None) -> dict[str, Any]:
    best = best_step(steps)
    served = latest(served or [])  # serve.jsonl as written: a variant measured on resume replaces its old row
    winner, comparisons = choose(spec.objective, served)
    shown = command_name(spec.model, spec.model_path)  # how the serve commands name the model
    rows = [serving.row(v, shown, spec.workload.concurrency, c, v is winner) for v, c in zip(served, comparisons)]
    evidence = serving.engine_evidence(rows, spec.objective, spec.workload.concurrency)
    base = steps[0] if steps else None
    accepted = [s for s in steps if s.accepted and s.technique]
    tradeoffs = [t for s in accepted for t in REGISTRY[s.technique].tradeoffs]
    docs = sorted({d for s in accepted for d in REGISTRY[s.technique].docs})
    open_q: list[str] = []
    unverified: list[dict[str, Any]] = []
    if best is not None:
        # Compatible with the accepted setup but not measured in this run: say why, mark unverified.
        tried = {s.technique for s in steps}
        if evidence:
            tried.add("serving-engine")  # measured in the serve stage: its evidence is in "serving_engine"
        for tid, t in REGISTRY.items():
            if tid in tried or t.applied(best.setup):
                continue
            c = t.check(facts, best.setup)
            if c.blockers:
                continue
            after = t.apply(facts, best.setup)
            why = "; ".join(c.issues) or ("not measurable here (concurrency, several devices or another engine)"
                                          if not measurable(after) else "not tried (trial or time budget)")
            unverified.append({"technique": tid, "why": why})
        open_q = sorted({i for u in unverified for i in u["why"].split("; ") if "?" in i})
    out_text = None
    if best is not None and best.trial.outputs:
        out_text = best.trial.outputs[0].text
    return {
        "kind": "tune-report", "schema_version": SCHEMA_VERSION,
        "model": spec.model, "workload": spec.workload.model_dump(mode="json"),
        "environment": _environment(steps),
        "objective": spec.objective, "constraints": spec.constraints.model_dump(), "tolerance": spec.tolerance.model_dump(),
        "steps": [_step_row(s) for s in steps],
        "best": None if best is None else {
            "index": best.index, "setup": best.setup.model_dump(),
            "config": config_for(best.setup, facts.accelerator.bf16).model_dump(mode="json", exclude_defaults=True),
            "python": reproduce_snippet(spec, best, facts.accelerator.bf16),
            "serve": winner.trial.shell(shown) if winner else serve_command(facts, best.setup),
            "serve_measured": winner is not None,
            "greedy_output_prompt_0": out_text,
            "validate": f"infertune measure --workload {run_dir / 'best.yaml' if run_dir else 'best.yaml'}",
        },
        "served": rows,
        "serve_decision": _decision(spec.objective, winner, rows),
        "serving_engine": evidence,
        "tradeoffs": tradeoffs, "docs": docs, "open_questions": open_q, "unverified": unverified,
        "warnings": list(warnings or []),
    }


def _decision(objective: str, winner: ServeStep | None, rows: list[dict[str, Any]]) -> str | None:
    if not rows:
        return None
    if winner is None:
        return "no served variant met the limits: the serve command is the accepted setup's, unverified"
    inconclusive = [r["label"] for r in rows if r["verdict"].startswith("within the spread")]
    why = (f"; within the spread of it (inconclusive, the simpler stack stays): {', '.join(inconclusive)}"
           if inconclusive else "")
    return f"ship {winner.label}: the {objective} measured best under the limits, clear of the spread{why}" \
        if len([r for r in rows if r["status"] == "ok"]) > 1 else f"ship {winner.label}: the only variant measured"


# --- rendering -----------------------------------------------------------------------------------------


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if unit == "MiB":
        return f"{v / MiB:,.0f} MiB"
    if unit == "ms":
        return f"{v * 1e3:,.1f} ms"
    return f"{v:,.2f}" if isinstance(v, float) else str(v)


def markdown(r: dict[str, Any]) -> str:
    w = r["workload"]
    lines = [f"# infertune tune report: {r['model']}", "",
             f"Objective: **{r['objective']}**. Workload: {len(w.get('prompts') or []) or 'default'} prompts, "
             f"max_new_tokens {w['max_new_tokens']}, input_len {w.get('input_len') or w.get('input_lens') or 'natural'}, "
             f"batch {w['batch']}, concurrency {w['concurrency']}. "
             "Numbers under *measured* come from trials on this machine; *estimate* numbers from the estimator.", "",
             "## Steps (measured)", ""]
    env = r.get("environment") or {}
    if env.get("busy"):
        lines += [f"**The machine was busy while these trials ran** ({'; '.join(env.get('busy_reasons') or [])}): "
                  "timings swing with other work, so differences are judged against the noise the interleaved "
                  "repeats measured; inconclusive steps may be decided on a quiet machine.", ""]
    lines += ["Each candidate was measured against the incumbent in interleaved pairs; Δ is the median paired "
              f"change of the {r['objective']}, ± the half-width of its band (docs/tuning.md). The trial columns "
              "show the candidate's first trial.", "",
              "| # | change | status | peak memory | TTFT | time/token | tokens/s | exact match | NLL delta | Δ ± noise | "
              "pairs | busy | verdict | adopted | why |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in r["steps"]:
        m, q = s["measured"], s["quality"] or {}
        change = s["technique"] or "baseline"
        band = "-" if s.get("delta") is None else (f"{s['delta']:+.1%} ± {s['noise']:.1%}" if s.get("noise") is not None
                                                   else f"{s['delta']:+.1%}")
        lines.append(f"| {s['index']} | {change} {s['changes'] or ''} | {m['status']} | {_fmt(m.get('peak_memory_bytes'), 'MiB')} | "
                     f"{_fmt(m.get('ttft_s'), 'ms')} | {_fmt(m.get('tpot_s'), 'ms')} | {_fmt(m.get('tokens_per_s'))} | "
                     f"{_fmt(q.get('exact_match_rate'))} | {_fmt(q.get('nll_delta'))} | {band} | "
                     f"{s.get('repeats', 1)} | {'yes' if s.get('busy') else ''} | {s.get('verdict') or '-'} | "
                     f"{'yes' if s['accepted'] else 'no'} | {s['reason']} |")
    lines += ["", "Each change was chosen on an estimate (before -> after, *estimate*):", ""]
    for s in r["steps"]:
        e = s["expected"]
        if e:
            measured = s["measured"].get("tpot_s")
            side = (f"; measured {_fmt(measured, 'ms')}, expected/measured {e['tpot_s_after'] / measured:.2f}"
                    if measured else "")
            lines.append(f"- step {s['index']} `{s['technique']}`: peak {_fmt(e['peak_bytes_before'], 'MiB')} -> "
                         f"{_fmt(e['peak_bytes_after'], 'MiB')}, time/token {_fmt(e['tpot_s_before'], 'ms')} -> "
                         f"{_fmt(e['tpot_s_after'], 'ms')} (expected, estimate{side}"
                         f"{'; ' + e['note'] if e.get('note') else ''})")
    b = r["best"]
    if b:
        lines += ["", "## The configuration to ship", "", "```python", b["python"].rstrip(), "```", "",
                  "Serve it" + (" (the served variant measured best, below):" if b.get("serve_measured") else
                                " (not load-tested in this run: unverified):"), "", "```bash", b["serve"], "```", ""]
        if b["greedy_output_prompt_0"] is not None:
            lines += [f"Greedy output for prompt 0 (measured): `{b['greedy_output_prompt_0']}`", ""]
    if r.get("served"):
        lines += serving.markdown(r) + ([f"Decision: {r['serve_decision']}.", ""] if r.get("serve_decision") else [])
    if r["tradeoffs"]:
        lines += ["## Trade-offs", ""] + [f"- {t}" for t in r["tradeoffs"]] + [""]
    if r["unverified"]:
        lines += ["## Not run here (unverified)", ""] + [f"- `{u['technique']}`: {u['why']}" for u in r["unverified"]] + [""]
    if r["open_questions"]:
        lines += ["## Open compatibility questions", ""] + [f"- {q}" for q in r["open_questions"]] + [""]
    if r["docs"]:
        lines += ["## Documentation", ""] + [f"- {d}" for d in r["docs"]] + [""]
    lines += ["## Environment", "", "```json", json.dumps(env, indent=2), "```", ""]
    if b:
        lines += [f"Re-validate the accepted configuration on the same workload: `{b['validate']}`", ""]
    if r["warnings"]:
        lines += ["## Warnings", ""] + [f"- {x}" for x in r["warnings"]]
    return "\n".join(lines) + "\n"


def plots(r: dict[str, Any], spec: TuneSpec, facts: Facts, steps: list[Step]) -> list[tuple[str, str]]:
    plt = pyplot()
    ok = [s for s in r["steps"] if s["measured"].get("status") == "ok"]
    labels = [s["technique"] or "baseline" for s in ok]
    out = []
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar(labels, [s["measured"]["peak_memory_bytes"] / MiB for s in ok], color="#4c72b0")
    ax.set_ylabel("peak memory, MiB (measured)")
    ax.tick_params(axis="x", rotation=20)
    out.append(("Peak memory per trial (measured)", png(fig)))

    fig, ax = plt.subplots(1, 2, figsize=(9, 3))
    ax[0].bar(labels, [s["measured"]["ttft_s"] * 1e3 for s in ok], color="#dd8452", label="TTFT")
    ax[0].set_ylabel("TTFT, ms (measured)")
    ax[1].bar(labels, [s["measured"]["tokens_per_s"] for s in ok], color="#55a868")
    ax[1].set_ylabel("tokens/s (measured)")
    for a in ax:
        a.tick_params(axis="x", rotation=20)
    out.append(("Latency and throughput per trial (measured)", png(fig)))

    # per-request percentiles: under concurrency the tail (queueing) is what users feel
    fig, ax = plt.subplots(1, 2, figsize=(9, 3))
    x = range(len(ok))
    for a, key, name in ((ax[0], "ttft_percentiles_s", "TTFT"), (ax[1], "tpot_percentiles_s", "inter-token latency")):
        for k, (p, color) in enumerate((("p50", "#4c72b0"), ("p95", "#dd8452"), ("p99", "#c44e52"))):
            a.bar([i + (k - 1) * 0.27 for i in x], [(s["measured"][key][p] or 0) * 1e3 for s in ok], 0.27,
                  color=color, label=p)
        a.set_xticks(list(x), labels, rotation=20)
        a.set_ylabel(f"{name}, ms (measured)")
        a.legend(fontsize=8)
    conc = ok[0]["measured"]["concurrency"] if ok else 1
    out.append((f"Latency percentiles per trial, concurrency {conc} (measured)", png(fig)))

    fig, ax = plt.subplots(figsize=(6, 3))
    q = [(s["technique"], s["quality"]) for s in ok if s["quality"]]
    if q:
        ax.bar([t for t, _ in q], [x["exact_match_rate"] for _, x in q], color="#8172b3", label="greedy exact match")
        ax.plot([t for t, _ in q], [x["nll_delta"] or 0 for _, x in q], "ko-", label="NLL delta (nats/token)")
        ax.legend(fontsize=8)
        ax.tick_params(axis="x", rotation=20)
    ax.set_title("quality vs baseline (measured)", fontsize=9)
    out.append(("Quality per trial (measured)", png(fig)))

    served = [v for v in r.get("served", []) if v["status"] == "ok" and v.get("levels")]
    if served:
        fig, ax = plt.subplots(1, 2, figsize=(9, 3))
        for v in served:
            xs = [lv["concurrency"] for lv in v["levels"]]
            ax[0].plot(xs, [lv["output_tokens_per_s"] for lv in v["levels"]], "o-", label=v["label"])
            ax[1].plot(xs, [(lv["ttft_s"]["p95"] or 0) * 1e3 for lv in v["levels"]], "o-", label=v["label"])
        ax[0].set_ylabel("output tokens/s (measured)")
        ax[1].set_ylabel("TTFT p95, ms (measured)")
        for a in ax:
            a.set_xlabel("concurrency")
            a.legend(fontsize=8)
        out.append(("Served: throughput and TTFT versus concurrency (measured)", png(fig)))

    best = best_step(steps)
    if best is not None:
        lengths = [64, 128, 256, 512, 1024, 2048, 4096, 8192]
        est = [estimate_setup(facts, best.setup, input_len=n).memory.total_bytes / MiB for n in lengths]
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.plot(lengths, est, "b-", label="estimate (peak above the process baseline)")
        m = best.trial.metrics
        if m is not None:
            ax.plot([m.input_tokens_mean], [(m.peak_memory_generate_bytes - m.baseline_memory_bytes) / MiB], "ro",
                    label="measured (this run)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("input tokens")
        ax.set_ylabel("MiB")
        ax.legend(fontsize=8)
        out.append(("Memory versus context length: estimate, with the measured point", png(fig)))
    return out


def write(run_dir: Path, spec: TuneSpec, steps: list[Step], facts: Facts, warnings: list[str] | None = None,
          served: list[ServeStep] | None = None) -> dict:
    import yaml

    r = build(spec, steps, facts, warnings, run_dir, served)
    best = best_step(steps)
    if best is not None:  # the accepted configuration on the same workload, for `infertune measure --workload`
        run_file = {**spec.workload.model_dump(mode="json", exclude_none=True), "model": spec.model_path,
                    "config": r["best"]["config"]}
        write_atomic(run_dir / "best.yaml", yaml.safe_dump(run_file, sort_keys=False))
    write_atomic(run_dir / "report.json", json.dumps(r, indent=2))
    md = markdown(r)
    write_atomic(run_dir / "report.md", md)
    page = html_page("infertune report", plots(r, spec, facts, steps), md)
    write_atomic(run_dir / "report.html", page)
    return r
