"""infertune doctor on a corpus of minimal shapes modelled on real public scripts (tests/data/doctor/corpus/).

Each file names the public script it was modelled on (first line) and marks every finding it must produce with
`# expect: IT0xx[,IT0yy]` at the end of that line; every other line must stay silent. The shapes are written
for this corpus (never copied). Together they hold the false positives, misses and uncovered mistakes listed
in issue 20, and clean scripts that must produce no finding.
"""

import re
from pathlib import Path

import pytest

from infertune import doctor

CORPUS = Path(__file__).parents[1] / "data" / "doctor" / "corpus"
SHAPES = sorted(CORPUS.glob("*.py"))
EXPECT = re.compile(r"#\s*expect:\s*([\w, ]+)")


def expected(path: Path) -> set[tuple[int, str]]:
    out = set()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = EXPECT.search(line)
        if m:
            out |= {(n, r.strip()) for r in m.group(1).split(",") if r.strip()}
    return out


def found(path: Path) -> set[tuple[int, str]]:
    report = doctor.check([path], select=["ALL"])  # the shapes hold the advisory rules' cases too
    assert report.errors == []
    return {(f.line, f.rule) for f in report.findings}


def test_corpus_is_big_enough_and_cites_its_sources():
    assert len(SHAPES) >= 40
    for p in SHAPES:
        assert p.read_text().startswith("# modelled on: "), p.name
    assert sum(1 for p in SHAPES if not expected(p)) >= 10  # clean shapes: no finding allowed


@pytest.mark.parametrize("shape", SHAPES, ids=lambda p: p.stem)
def test_shape_gives_exactly_its_expected_findings(shape):
    assert found(shape) == expected(shape)


def test_precision_and_recall_over_the_corpus():
    tp = fp = fn = 0
    for p in SHAPES:
        got, want = found(p), expected(p)
        tp, fp, fn = tp + len(got & want), fp + len(got - want), fn + len(want - got)
    assert tp / (tp + fp) >= 0.95 and tp / (tp + fn) >= 0.95, (tp, fp, fn)
