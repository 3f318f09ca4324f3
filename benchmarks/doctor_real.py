"""How right `infertune doctor` is on real public scripts: precision and recall against hand labels (doctor-real-1).

The corpus (benchmarks/corpora/doctor-real-1/) holds pointers (repository, path, commit) and labels written before the
doctor ran: each real problem with its line and kind (a rule id from VOCABULARY.md, or `other:<slug>` for one no rule
covers), and the tempting patterns that are *not* problems there (`silent`). The scripts' text is never committed; it
is read from `scripts/<id>.py` (git-ignored), saved at the labelled commit.

Matching: a finding is right when an unmatched labelled problem of the same rule id lies within LINES lines of it,
or when the finding lies anywhere inside the statement the problem is labelled at (a multi-line call is labelled at
its first line; the doctor may point at an argument further down); each problem takes at most one finding, so a
problem reported twice counts one right and one wrong. Every other finding is a false positive.

- precision = right findings / findings
- recall    = problems found / problems labelled (all of them: `other:` kinds count as misses)

    PYTHONPATH=src python benchmarks/doctor_real.py [--split test|dev|all] [-v] [--select ...]

Prints the test part first when `all`. A case whose script is missing is listed and left out of both figures.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "benchmarks" / "corpora" / "doctor-real-1"
LINES = 3


def load(corpus: Path, split: str) -> list[dict[str, Any]]:
    cases = []
    for f in sorted(corpus.glob(f"labels-*-{split}.json")):
        for case in json.loads(f.read_text()):
            case["split"] = split
            cases.append(case)
    return cases


def findings(
    path: Path, select: list[str] | None, name: str | None = None
) -> tuple[list[tuple[int, str, str]], str | None]:
    from infertune import doctor

    # checked from a folder of its own: the doctor reads version pins beside or above a script, and this
    # repository's pyproject.toml (transformers 5) is not the script's; under its own file name (`name`, from the
    # labels' path), which is what a user runs the doctor on
    with tempfile.TemporaryDirectory() as tmp:
        alone = Path(tmp) / (name or path.name)
        shutil.copyfile(path, alone)
        try:
            report = doctor.check([alone], select=select)
        except ValueError as e:  # a doctor that refuses unreadable input instead of reporting it
            return _syntax_error(str(e))
    if report.errors:
        return _syntax_error("; ".join(report.errors))
    return [(f.line, f.rule, f.message) for f in report.findings], None


SYNTAX_ERROR = re.compile(r":(\d+):\d+: syntax error: ")


def _syntax_error(error: str) -> tuple[list[tuple[int, str, str]], str | None]:
    """The doctor's refusal of a file Python cannot parse names the line: the user is told the labelled problem
    there, so it counts as a finding of `other:syntax-error` (any other refusal stays an error of the run)."""
    m = SYNTAX_ERROR.search(error)
    return ([(int(m.group(1)), "other:syntax-error", error)], None) if m else ([], error)


def statement_ends(source: str) -> dict[int, int]:
    """The last line of the widest statement starting at each line (a call spread over lines), for matching."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    ends: dict[int, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not hasattr(node, "body"):  # simple statements, not a whole loop or def
            ends[node.lineno] = max(ends.get(node.lineno, 0), node.end_lineno or node.lineno)
    return ends


def function_bodies(source: str) -> dict[int, int]:
    """The last line of each function, keyed by its `def` line and by each decorator's line (`@app.post(...)`)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    out: dict[int, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for start in [node.lineno, *(d.lineno for d in node.decorator_list)]:
                out[start] = node.end_lineno or node.lineno
    return out


# rules whose finding is about the function it is in (the web handler that runs generate, or blocks its event
# loop; the message names it): a label at that function's `def` is the same problem (11 of the 54 IT022 labels in
# doctor-real-1 to -21 are there, 43 at the call)
FUNCTION_LEVEL = {"IT011", "IT022"}


def _near(p: dict[str, Any], line: int, ends: dict[int, int], bodies: dict[int, int] | None = None) -> bool:
    if abs(p["line"] - line) <= LINES or p["line"] <= line <= ends.get(p["line"], 0):
        return True
    return bodies is not None and _kind(p) in FUNCTION_LEVEL and p["line"] <= line <= bodies.get(p["line"], 0)


# problems labelled `other:<slug>` before a rule covered them, and the rule that covers each now (the label's text
# names the problem; the rule came later, written from the development parts' cases)
COVERED = {
    "other:no-truncation": "IT034",
    "other:missing-trust-remote-code": "IT035",
    "other:default-max-length": "IT036",
    "other:default-length-cap": "IT036",
    "other:default-20-token-cap": "IT036",
    "other:pad-without-pad-token": "IT037",
    # (read from the labels' slugs after IT038 was written from doctor-real-5's missing-imports case: each of these
    # labels names a name the script reads and never defines)
    "other:missing-imports": "IT038",
    "other:torch-not-imported": "IT038",
    "other:undefined-model-id": "IT038",
    "other:undefined-outputs": "IT038",
    "other:undefined-tokenizer-model": "IT038",
    "other:undefined-cli-arg": "IT038",
    "other:undefined-argparse-attribute": "IT038",
    "other:duplicate-model-load": "IT039",
    "other:unused-duplicate-model-load": "IT039",
    "other:kbit-training-prep-for-inference": "IT040",
    "other:kbit-training-prep-at-inference": "IT040",
    "other:untrained-classifier-head": "IT041",
    "other:result-discarded": "IT042",
    "other:discarded-results": "IT042",
    "other:discarded-output": "IT042",
    "other:output-discarded": "IT042",
    "other:misspelled-bnb-option": "IT043",
    "other:misspelled-generation-config": "IT043",
    "other:history-shared-across-clients": "IT044",
    "other:shared-chat-history": "IT044",
    "other:history-shared-across-chats": "IT044",
    "other:history-shared-across-channels": "IT044",
    "other:batch-decode-one-sequence": "IT045",
    "other:batch-decode-single-sequence": "IT045",
    "other:invalid-model-id": "IT046",
    "other:timing-without-warmup": "IT047",
    "other:no-repeat-ngram-over-prompt": "IT048",
    "other:no-repeat-bigram-long-answer": "IT048",
    "other:no-repeat-ngram-chat": "IT048",
    "other:cls-pooling-on-mean-pooled-model": "IT026",
    "other:wrong-auto-class": "IT049",
    "other:inference-outside-button": "IT050",
    "other:removed-conversational-pipeline": "IT051",
    "other:removed-pipeline-task": "IT051",
    "other:invalid-device-string": "IT052",
    "other:invalid-fallback-device": "IT052",
    "other:wrong-sample-rate": "IT053",
    "other:whisper-30s-truncation": "IT054",
    "other:audio-truncated-30s": "IT054",
    "other:long-audio-no-chunking": "IT054",
    "other:long-audio-truncated": "IT054",
    "other:sample-rate-mismatch": "IT053",
    "other:empty-main-block": "other:syntax-error",
    "other:return-outside-function": "other:syntax-error",
    "other:notebook-magic-in-py": "other:syntax-error",  # (a `!pip install` line: Python refuses the file)
    "other:special-tokens-in-output": "IT055",
    "other:special-tokens-in-decoded-output": "IT055",
    "other:special-tokens-in-decoded-text": "IT055",
    "other:special-tokens-in-decode": "IT055",
    "other:special-tokens-in-transcript": "IT055",
    "other:special-tokens-kept": "IT055",
    "other:quantization-config-unused": "IT056",
    "other:dialogpt-missing-eos": "IT013",
    "other:unused-quant-config": "IT056",
}


def _kind(label: dict[str, Any]) -> str:
    return COVERED.get(label["kind"], label["kind"])


def judge(
    case: dict[str, Any],
    found: list[tuple[int, str, str]],
    ends: dict[int, int] | None = None,
    bodies: dict[int, int] | None = None,
) -> dict[str, Any]:
    """Right and wrong findings; `ends` (statement_ends of the script) lets a finding inside a labelled statement
    match it, and `bodies` (function_bodies) a FUNCTION_LEVEL finding inside the function whose def is labelled."""
    ends = ends or {}
    problems = [dict(p, kind=_kind(p), found=False) for p in case.get("problems", [])]
    right, wrong = [], []
    for line, rule, message in sorted(found):
        near = [p for p in problems if not p["found"] and _kind(p) == rule and _near(p, line, ends, bodies)]
        if near:
            best = min(near, key=lambda p: abs(p["line"] - line))
            best["found"] = True
            right.append((line, rule))
        else:
            silent = any(_kind(s) == rule and _near(s, line, ends, bodies) for s in case.get("silent", []))
            wrong.append((line, rule, message, silent))
    return {"right": right, "wrong": wrong, "problems": problems}


def report(
    split: str, cases: list[dict[str, Any]], corpus: Path, select: list[str] | None, verbose: bool
) -> dict[str, Any]:
    rules_right, rules_wrong, kinds_all, kinds_found = Counter(), Counter(), Counter(), Counter()
    missing, errors, n_cases = [], [], 0
    for case in cases:
        path = corpus / "scripts" / f"{case['id']}.py"
        if not path.exists():
            missing.append(case["id"])
            continue
        own = Path(case.get("path", "")).name
        found, error = findings(path, select, own if own.endswith(".py") else None)
        if error:
            errors.append(f"{case['id']}: {error}")
        n_cases += 1
        source = path.read_text(encoding="utf-8", errors="replace")
        j = judge(case, found, statement_ends(source), function_bodies(source))
        for _, rule in j["right"]:
            rules_right[rule] += 1
        for _, rule, _, _ in j["wrong"]:
            rules_wrong[rule] += 1
        for p in j["problems"]:
            kinds_all[p["kind"]] += 1
            kinds_found[p["kind"]] += p["found"]
        if verbose:
            print(f"  {case['id']} {case['repo']}/{case['path']}")
            for p in j["problems"]:
                mark = "found " if p["found"] else "MISSED"
                print(f"    {mark} {p['kind']:<22} line {p['line']:>4}  {p['what'][:80]}")
            for line, rule, message, silent in j["wrong"]:
                tag = "wrong (labelled silent)" if silent else "wrong"
                print(f"    {tag:<6} {rule:<22} line {line:>4}  {message[:90]}")
    n_find = sum(rules_right.values()) + sum(rules_wrong.values())
    n_prob = sum(kinds_all.values())
    precision = sum(rules_right.values()) / n_find if n_find else None
    recall = sum(kinds_found.values()) / n_prob if n_prob else None
    print(f"{split}: {n_cases} scripts, {n_find} findings, {n_prob} labelled problems")
    if precision is not None:
        print(f"  precision {precision:.0%} ({sum(rules_right.values())} of {n_find} findings right)")
    if recall is not None:
        print(f"  recall    {recall:.0%} ({sum(kinds_found.values())} of {n_prob} problems found)")
    print("  by rule (findings right/wrong; problems found/labelled):")
    for k in sorted(set(rules_right) | set(rules_wrong) | set(kinds_all)):
        print(f"    {k:<28} {rules_right[k]:>3} / {rules_wrong[k]:<3}   {kinds_found[k]:>3} / {kinds_all[k]}")
    for m in missing:
        print(f"  missing script: {m} (recover it from its pointer)")
    for e in errors:
        print(f"  error: {e}")
    return {"split": split, "scripts": n_cases, "precision": precision, "recall": recall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=["test", "dev", "all"], default="all")
    ap.add_argument("--select", action="append", default=None, help="rules to run (default: the doctor's default)")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    for split in ["test", "dev"] if args.split == "all" else [args.split]:
        cases = load(args.corpus, split)
        if not cases:
            print(f"{split}: no labels-*-{split}.json in {CORPUS}", file=sys.stderr)
            continue
        report(split, cases, args.corpus, args.select, args.verbose)
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
