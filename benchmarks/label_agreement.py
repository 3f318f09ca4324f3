"""How far two hand labellings of the same scripts agree, and how the doctor scores against each and both.

A corpus's labels (`labels-*-{test,dev}.json`, the first reading) and a second reading of the same scripts by
other labellers who saw neither the first labels nor the doctor (`second/labels-*.json`). The second reading is
scored as if it were a checker, with benchmarks/doctor_real.py's matching (same kind within LINES lines, or inside
the labelled statement): what a careful second expert gets "right" by the first one's labels is the ceiling a
checker measured against one labelling can expect. Three views of a kind:

- strict: the kinds as written (`other:` slugs must be equal);
- other-as-one: every `other:<slug>` counts as one kind (two labellers rarely name an unlisted problem alike);
- any-kind: the place alone (a problem both saw, named differently).

Then the doctor against the first reading, the second, and both: right where either reading labels that problem
there, wrong where neither does (a finding only one labeller agrees with is a judgement call, not a plain error).

    PYTHONPATH=src python benchmarks/label_agreement.py --corpus benchmarks/corpora/doctor-real-17

Nothing is asserted; figures are for benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # doctor_real.py beside it, run as a script or imported
from doctor_real import _kind, findings, judge, statement_ends  # noqa: E402


def _cases(paths: list[Path]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for p in paths for c in json.loads(p.read_text())}


def _relabel(case: dict[str, Any], view: str) -> dict[str, Any]:
    """The case with its kinds read the view's way (doctor_real's COVERED mapping first)."""

    def kind(label: dict[str, Any]) -> str:
        k = _kind(label)
        if view == "any-kind":
            return "problem"
        if view == "other-as-one" and k.startswith("other:"):
            return "other"
        return k

    return {
        "problems": [dict(p, kind=kind(p)) for p in case.get("problems", [])],
        "silent": [dict(s, kind=kind(s)) for s in case.get("silent", [])],
    }


def agreement(first: dict, second: dict, ends: dict[str, dict[int, int]], view: str) -> tuple[int, int, int, int]:
    """(second's problems the first labels, second's problems, first's problems the second labels, first's
    problems) over the scripts both read."""
    right = n_second = found = n_first = 0
    for cid in sorted(set(first) & set(second)):
        a, b = _relabel(first[cid], view), _relabel(second[cid], view)
        as_found = [(p["line"], p["kind"], "") for p in b["problems"]]
        j = judge(a, as_found, ends[cid])
        right += len(j["right"])
        n_second += len(as_found)
        found += sum(p["found"] for p in j["problems"])
        n_first += len(j["problems"])
    return right, n_second, found, n_first


def doctor_against(
    first: dict, second: dict, ends: dict[str, dict[int, int]], found_by: dict[str, list]
) -> dict[str, tuple[int, int]]:
    """The doctor's right findings / findings against the first reading, the second, and either."""
    out = {"first": [0, 0], "second": [0, 0], "either": [0, 0]}
    for cid in sorted(set(first) & set(second)):
        found = found_by[cid]
        ja, jb = (judge(_relabel(c[cid], "strict"), found, ends[cid]) for c in (first, second))
        ra, rb = set(ja["right"]), set(jb["right"])
        for name, right in (("first", ra), ("second", rb), ("either", ra | rb)):
            out[name][0] += len(right)
            out[name][1] += len(found)
    return {k: (v[0], v[1]) for k, v in out.items()}


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f}% ({a} of {b})" if b else "n/a"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--split", choices=["test", "dev", "all"], default="all")
    args = ap.parse_args()
    splits = ["test", "dev"] if args.split == "all" else [args.split]
    first = _cases([p for s in splits for p in sorted(args.corpus.glob(f"labels-*-{s}.json"))])
    second = _cases(sorted((args.corpus / "second").glob("labels-*.json")))
    both = sorted(set(first) & set(second) & {p.stem for p in (args.corpus / "scripts").glob("*.py")})
    if not both:
        print(f"no script read twice in {args.corpus} (second/labels-*.json)", file=sys.stderr)
        return 2
    first, second = {c: first[c] for c in both}, {c: second[c] for c in both}
    sources = {c: (args.corpus / "scripts" / f"{c}.py").read_text(encoding="utf-8", errors="replace") for c in both}
    ends = {c: statement_ends(src) for c, src in sources.items()}
    n1 = sum(len(c.get("problems", [])) for c in first.values())
    n2 = sum(len(c.get("problems", [])) for c in second.values())
    print(f"{args.split}: {len(both)} scripts read twice; {n1} problems in the first reading, {n2} in the second")
    print("  the second reading scored against the first (precision; recall):")
    for view in ("strict", "other-as-one", "any-kind"):
        right, n_second, found, n_first = agreement(first, second, ends, view)
        print(f"    {view:<13} precision {_pct(right, n_second):<18} recall {_pct(found, n_first)}")
    found_by = {c: findings(args.corpus / "scripts" / f"{c}.py", None)[0] for c in both}
    print("  the doctor (precision; right where that reading labels the problem there):")
    for name, (right, n) in doctor_against(first, second, ends, found_by).items():
        print(f"    against {name:<7} {_pct(right, n)}")
    for name, labels in (("first", first), ("second", second)):
        n = sum(len(c.get("problems", [])) for c in labels.values())
        hit = sum(
            sum(p["found"] for p in judge(_relabel(labels[c], "strict"), found_by[c], ends[c])["problems"])
            for c in both
        )
        print(f"    recall of the {name:<6} reading {_pct(hit, n)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
