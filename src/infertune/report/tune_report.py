"""A tune run's report: report.json (for programs), report.md (for people), report.html (self-contained,
charts embedded). Measured numbers and estimates carry their labels; what was not run is "unverified".
Everything the pages show is read from report.json, so a rebuilt report says the same thing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infertune.advisor.advise import moves_to_try, no_expected_change
from infertune.core.paths import write_atomic
from infertune.core.schema import SCHEMA_VERSION
from infertune.measure.cluster_node import by_node
from infertune.measure.machine import combine
from infertune.models.store import command_name
from infertune.report import serve_table
from infertune.report.markdown import markdown
from infertune.report.page import tune_page
from infertune.techniques import REGISTRY, Facts
from infertune.techniques.render import config_for, estimate_setup, serve_command
from infertune.techniques.serving import vllm_command
from infertune.tuning.loop import measurable, twin_of
from infertune.tuning.run import Confirmation, Run, ServeStep, Step, TuneSpec, best_step
from infertune.tuning.serve_stage import choose, latest

CONTEXT_LENGTHS = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


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
        spec.model_path,
        wl.max_new_tokens,
        prompt if isinstance(prompt, str) else [m.model_dump() for m in prompt],
        seed=wl.seed,
        generate=gen,
        tp=step.setup.tp,
    )


def memory_vs_context(facts: Facts, steps: list[Step], best: Step) -> dict[str, Any]:
    """The estimator's peak (above the process baseline) at growing prompt lengths for the baseline and the
    shipped setups, with what their trials measured (kind: estimate, measured points beside it)."""
    longest = facts.profile.max_position_embeddings or CONTEXT_LENGTHS[-1]
    lengths = [n for n in CONTEXT_LENGTHS if n <= longest] or [CONTEXT_LENGTHS[0]]
    named = {"baseline": steps[0]} if best is steps[0] else {"baseline": steps[0], "shipped": best}
    measured = []
    for name, s in named.items():
        m = s.trial.metrics
        if m is not None:
            measured.append(
                {
                    "setup": name,
                    "input_tokens": round(m.input_tokens_mean),
                    "bytes": m.peak_memory_generate_bytes - m.baseline_memory_bytes,
                }
            )
    return {
        "kind": "estimate",
        "input_tokens": lengths,
        "estimate_bytes": {
            name: [estimate_setup(facts, s.setup, input_len=n).memory.total_bytes for n in lengths]
            for name, s in named.items()
        },
        "measured": measured,
        "capacity_bytes": facts.accelerator.memory_bytes,
        "capacity_name": "RAM" if facts.platform == "cpu" else "device memory",
    }


def _metrics_row(s: Step) -> dict[str, Any]:
    m = s.trial.metrics
    if m is None:
        return {"status": s.trial.status}
    return {
        "status": s.trial.status,
        "peak_memory_bytes": m.peak_memory_bytes,
        "peak_above_baseline_bytes": m.peak_memory_bytes - m.baseline_memory_bytes,
        "memory_kind": m.memory_kind,
        "ttft_s": m.ttft_s,
        "tpot_s": m.tpot_s,
        "e2e_s": m.e2e_s,
        "tokens_per_s": m.tokens_per_s,
        "reference_nll": m.reference_nll,
        "concurrency": m.concurrency,
        "requests_per_s": m.requests_per_s,
        "ttft_percentiles_s": {"p50": m.ttft_p50_s, "p95": m.ttft_p95_s, "p99": m.ttft_p99_s},
        "tpot_percentiles_s": {"p50": m.tpot_p50_s, "p95": m.tpot_p95_s, "p99": m.tpot_p99_s},
    }


def _environment(steps: list[Step]) -> dict[str, Any] | None:
    """The baseline trial's environment, with how busy the machine was over every trial of the run."""
    if not steps:
        return None
    env = dict(steps[0].trial.environment or {})
    load = combine([s.machine or s.trial.machine for s in steps])
    env.update(
        busy=bool(load and load.busy),
        load_average=load.load_average if load else None,
        cores=load.cores if load else None,
        others_cpu=load.others_cpu if load else None,
        busy_reasons=load.reasons if load else [],
    )
    if nodes := by_node([(s.trial.environment, s.machine or s.trial.machine) for s in steps]):
        env["nodes"] = nodes  # a cluster run: where its steps ran and whether each node was busy (cluster_node.py)
    return env


def _step_row(s: Step) -> dict[str, Any]:
    busy = s.machine or s.trial.machine
    return {
        "index": s.index,
        "technique": s.technique,
        "changes": s.changes,
        "accepted": s.accepted,
        "verdict": s.verdict,
        "delta": s.delta,
        "noise": s.noise,
        "reason": s.reason,
        "objective": s.objective,
        "repeats": len(s.pairs) if s.technique else 1,
        "stopped": s.stopped,  # how many pairs the step needed and why it stopped there
        "noise_floor": s.noise_floor,
        "busy": bool(busy and busy.busy),
        "placement": (s.trial.environment or {}).get("placement"),  # on a cluster: where the step's trials ran
        "pairs": [p.model_dump() for p in s.pairs],
        "tie": s.tie.model_dump() if s.tie else None,
        "measured": _metrics_row(s),
        "quality": s.quality.model_dump() if s.quality else None,
        "expected": s.expected.model_dump(mode="json") if s.expected else None,
    }


def build(
    spec: TuneSpec,
    steps: list[Step],
    facts: Facts,
    warnings: list[str] | None = None,
    run_dir: Path | None = None,
    served: list[ServeStep] | None = None,
    confirmation: Confirmation | None = None,
) -> dict[str, Any]:
    best = best_step(steps)
    served = latest(served or [])  # serve.jsonl as written: a variant measured on resume replaces its old row
    winner, comparisons = choose(spec.objective, served)
    shown = command_name(spec.model, spec.model_path)  # how the serve commands name the model
    rows = [
        serve_table.row(v, shown, spec.workload.concurrency, c, v is winner)
        for v, c in zip(served, comparisons, strict=True)
    ]
    evidence = serve_table.engine_evidence(rows, spec.objective, spec.workload.concurrency)
    accepted = [REGISTRY[s.technique] for s in steps if s.accepted and s.technique]
    shipped = best.setup if best is not None else None  # what applies to the setup that ships
    tradeoffs = [
        t
        for technique in accepted
        for t in (technique.tradeoffs_for(facts, shipped) if shipped else technique.tradeoffs)
    ]
    docs = sorted({d for technique in accepted for d in technique.docs})
    open_q: list[str] = []
    unverified: list[dict[str, Any]] = []
    if best is not None:
        # Compatible with the accepted setup but not measured in this run: say why, mark unverified.
        tried = {s.technique for s in steps}
        moves = {c.technique: c for c in reversed(moves_to_try(facts, best.setup))}  # each technique's first move
        unchanged = {t for t, c in moves.items() if no_expected_change(c)}
        twins = {t: twin for t, c in moves.items() if (twin := twin_of(c, steps, best)) is not None}
        if evidence:  # measured in the serve stage: its evidence is in "serving_engine"
            tried |= {tid for tid, t in REGISTRY.items() if t.measured_when_served}
        for tid, t in REGISTRY.items():
            if tid in tried or t.applied(best.setup):
                continue
            c = t.check(facts, best.setup)
            if c.blockers:
                continue
            after = t.apply(facts, best.setup)
            why = "; ".join(c.issues) or (
                "not measurable here (concurrency, several devices or another engine)"
                if not measurable(after)
                else "not tried: the estimate sees no difference it would make here (time, memory, capacity)"
                if tid in unchanged
                else f"not tried: the estimate computes it exactly as `{twins[tid].technique}`, measured in step "
                f"{twins[tid].index} and not adopted"
                if tid in twins
                else "not tried (trial or time budget)"
            )
            unverified.append({"technique": tid, "why": why})
        open_q = sorted({i for u in unverified for i in u["why"].split("; ") if "?" in i})
    out_text = None
    if best is not None and best.trial.outputs:
        out_text = best.trial.outputs[0].text
    return {
        "kind": "tune-report",
        "schema_version": SCHEMA_VERSION,
        "model": spec.model,
        "workload": spec.workload.model_dump(mode="json"),
        "environment": _environment(steps),
        "objective": spec.objective,
        "constraints": spec.constraints.model_dump(),
        "tolerance": spec.tolerance.model_dump(),
        "steps": [_step_row(s) for s in steps],
        "confirmation": confirmation.model_dump(mode="json") if confirmation else None,
        "best": None
        if best is None
        else {
            "index": best.index,
            "setup": best.setup.model_dump(),
            "config": config_for(best.setup, facts.accelerator.bf16).model_dump(mode="json", exclude_defaults=True),
            "python": reproduce_snippet(spec, best, facts.accelerator.bf16),
            "serve": winner.trial.shell(shown) if winner and winner.trial else serve_command(facts, best.setup),
            "serve_measured": winner is not None,
            "greedy_output_prompt_0": out_text,
            "engine": None
            if best.setup.engine == "vllm" or (winner and winner.engine != "transformers")
            else vllm_command(
                shown, best.setup, facts.input_len + facts.max_new_tokens, max(facts.concurrency * facts.batch, 1)
            ),
            "validate": f"infertune measure --workload {run_dir / 'best.yaml' if run_dir else 'best.yaml'}",
        },
        "memory_vs_context": None if best is None else memory_vs_context(facts, steps, best),
        "served": rows,
        "serve_decision": _decision(spec.objective, winner, rows),
        "serving_engine": evidence,
        "tradeoffs": tradeoffs,
        "docs": docs,
        "open_questions": open_q,
        "unverified": unverified,
        "warnings": list(warnings or []),
    }


def _decision(objective: str, winner: ServeStep | None, rows: list[dict[str, Any]]) -> str | None:
    if not rows:
        return None
    if winner is None:
        return "no served variant met the limits: the serve command is the accepted setup's, unverified"
    inconclusive = [r["label"] for r in rows if r["verdict"].startswith("within the spread")]
    why = (
        f"; within the spread of it (inconclusive, the simpler stack stays): {', '.join(inconclusive)}"
        if inconclusive
        else ""
    )
    return (
        f"ship {winner.label}: the {objective} measured best under the limits, clear of the spread{why}"
        if len([r for r in rows if r["status"] == "ok"]) > 1
        else f"ship {winner.label}: the only variant measured"
    )


def write(
    run_dir: Path,
    spec: TuneSpec,
    steps: list[Step],
    facts: Facts,
    warnings: list[str] | None = None,
    served: list[ServeStep] | None = None,
) -> dict:
    import yaml

    r = build(spec, steps, facts, warnings, run_dir, served, Run(run_dir).confirmation())
    best = best_step(steps)
    if best is not None:  # the accepted configuration on the same workload, for `infertune measure --workload`
        run_file = {
            **spec.workload.model_dump(mode="json", exclude_none=True),
            "model": spec.model_path,
            "config": r["best"]["config"],
        }
        write_atomic(run_dir / "best.yaml", yaml.safe_dump(run_file, sort_keys=False))
    write_atomic(run_dir / "report.json", json.dumps(r, indent=2))
    write_atomic(run_dir / "report.md", markdown(r))
    write_atomic(run_dir / "report.html", tune_page(r))
    return r
