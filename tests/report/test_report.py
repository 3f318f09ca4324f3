"""The tune report as a person reads it: verdict first, numbers for people, estimates told apart from
measurements, self-contained, laid out without overflow in a real browser (headless Chromium).

tests/data/demo-report.json is the report.json of a real `infertune demo` run (SmolLM2-135M on 2 busy CPU
cores, 2026-12-03); the pages are rendered from it by the code under test."""

import copy
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infertune.core import human
from infertune.report.markdown import markdown
from infertune.report.page import tune_page
from infertune.report.verdict import step_verdict, summary

DEMO = json.loads((Path(__file__).parents[1] / "data" / "demo-report.json").read_text())
REPR = re.compile(r"\{'|'\}|\d\.\d+e[+-]\d|\bNone\b|\bTrue\b|\bFalse\b")  # a dict, an exponent, a Python literal


def _text(page: str) -> str:
    """What a reader sees: tags, scripts, styles, images and code blocks removed (code is Python on purpose)."""
    page = re.sub(r"<(script|style|pre)\b.*?</\1>", " ", page, flags=re.S)
    page = re.sub(r"<img [^>]*>", " ", page)
    return re.sub(r"<[^>]+>", " ", page)


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15))
def test_numbers_for_people_never_use_an_exponent_or_a_repr(v):
    for text in (human.number(v), human.size(abs(v)), human.duration(abs(v) / 1e6), human.rate(abs(v))):
        assert "e+" not in text and "e-" not in text and "inf" not in text, text


def test_units_people_read():
    assert human.size(905 * 2**20) == "905 MiB" and human.size(1.25 * 2**30) == "1.25 GiB"
    assert human.duration(0.0385) == "38.5 ms" and human.duration(1.2345) == "1.23 s"
    assert human.number(944_600_000) == "944,600,000" and human.number(0.0123) == "0.0123"
    assert human.settings({"dtype": "bfloat16", "attn": "sdpa"}) == "dtype bfloat16, attn sdpa"
    assert human.settings({"cache_config": {"nbits": 4}}) == "cache_config nbits 4"


def test_verdict_names_the_shipped_change_and_its_measured_gain():
    v = summary(DEMO)
    kept = [s for s in DEMO["steps"] if s["accepted"] and s["technique"]]
    assert v["ship"] == human.settings(kept[-1]["changes"])
    base, best = DEMO["steps"][0]["objective"], DEMO["steps"][DEMO["best"]["index"]]["objective"]
    assert human.change(best / base - 1) in v["headline"] and "measured" in v["headline"]
    assert v["sure"] == "moderate" and any("no noise band" in w for w in v["why_sure"])  # one trial per step


def test_markdown_reads_top_down_with_no_repr():
    md = markdown(DEMO)
    order = [
        md.index(h)
        for h in (
            "## Verdict",
            "## Steps (measured)",
            "## The configuration to ship",
            "## Not verified in this run",
            "## Environment",
        )
    ]
    assert order == sorted(order)
    prose = re.sub(r"```.*?```", "", md, flags=re.S)  # the code blocks are Python on purpose
    assert not REPR.search(prose), REPR.search(prose)
    assert "*estimate*" in md and "CPU: " in md and "```json" not in md


def test_page_order_labels_and_self_containment():
    page = tune_page(DEMO)
    order = [page.index(x) for x in ("<h1>", "id='verdict'", "id='steps'", "<figure", "id='ship'", "id='unverified'")]
    assert order == sorted(order)
    assert not REPR.search(_text(page)), REPR.search(_text(page))
    assert page.count("<img ") == page.count("src='data:image/svg+xml;base64,") == 4
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page.replace("<a href='http", ""))  # nothing fetched
    assert "<link" not in page and "@import" not in page
    assert "class='tag estimate'" in page and "class='tag measured'" in page  # the two kinds, labelled apart
    for block in (DEMO["best"]["serve"], DEMO["best"]["engine"]):
        assert f"<pre><code class='language-bash'>{block}</code></pre>" in page.replace("&#x27;", "'")


def test_fields_of_noise_aware_runs_render_when_present():
    r = copy.deepcopy(DEMO)
    r["steps"][1].update(verdict="inconclusive", delta=0.012, noise=0.04)
    r["steps"][2].update(verdict="kept", delta=-0.69, noise=0.05)
    r["environment"].update(busy=True, load_average=[6.2, 5.9, 3.1])
    assert step_verdict(r["steps"][1]) == "inconclusive"
    v = summary(r)
    assert "noise band ±5.0%" in v["headline"] and v["sure"] == "low"
    assert any("inconclusive" in w for w in v["why_sure"]) and any("busy" in w for w in v["why_sure"])
    page = tune_page(r)
    assert "class='tag inconclusive'" in page and "noise ±4.0%" in page and "6.20, 5.90, 3.10 (busy" in page
    assert "| +1.2% | ±4.0% |" in markdown(r)


@pytest.mark.parametrize("width", [1280, 1024])
def test_demo_report_in_a_real_browser(browser, tmp_path, width):
    page = tmp_path / "report.html"
    page.write_text(tune_page(DEMO), encoding="utf-8")
    seen = browser.layout(page, width=width)
    assert seen["scroll_width"] <= seen["viewport"] and seen["wide"] == []  # nothing past the viewport
    assert len(seen["images"]) == 4 and all(i["loaded"] and i["width"] > 300 for i in seen["images"])
    assert 0 < seen["verdict_top"] < seen["first_chart_top"]


def test_report_prints_to_pdf(browser, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(tune_page(DEMO), encoding="utf-8")
    pdf = tmp_path / "report.pdf"
    browser._run("--no-pdf-header-footer", f"--print-to-pdf={pdf}", page.as_uri())
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF") and data.count(b"/Type /Page") - data.count(b"/Type /Pages") >= 2


def test_how_each_step_stopped_is_said_under_the_table():
    r = copy.deepcopy(DEMO)
    r["steps"][1]["stopped"] = "stopped after 1 pair(s): a clear loser"
    md, page = markdown(r), tune_page(r)
    assert "How each step stopped:" in md and "- step 1: stopped after 1 pair(s): a clear loser" in md
    assert "How each step stopped</h3>" in page and "step 1: stopped after 1 pair(s): a clear loser" in _text(page)
    del r["steps"][1]["stopped"]
    assert "How each step stopped" not in markdown(r)


def test_the_end_of_run_confirmation_is_the_headline_gain_and_shows_under_the_steps():
    """The pick measured again against the baseline at the end: its fresh pairs give the headline's gain and band;
    a pick the fresh pairs did not confirm lowers the certainty."""
    r = copy.deepcopy(DEMO)
    best = r["best"]["index"]
    pairs = [
        {"incumbent": 1.5, "candidate": 1.05, "busy": False},
        {"incumbent": 1.48, "candidate": 1.02, "busy": False},
    ]
    r["confirmation"] = {
        "winner": best, "outcome": "confirmed", "reason": "the pick against the baseline, 2 fresh pairs: confirmed",
        "verdict": "kept", "delta": -0.305, "noise": 0.006, "pairs": pairs, "stopped": "stopped after 2 pairs",
    }  # fmt: skip
    v = summary(r)
    assert f"1.49 s → 1.04 s ({human.change(-0.305)}, noise band ±0.6%)" in v["headline"]
    assert "2 fresh pairs at the end" in v["headline"]
    assert any("confirmation: confirmed" in w for w in v["why_sure"])
    assert "Confirmed at the end (measured): the pick against the baseline" in markdown(r)
    assert "<h3>Confirmed at the end</h3>" in tune_page(r)
    r["confirmation"].update(outcome="not confirmed", verdict="inconclusive", delta=-0.02, noise=0.08)
    assert summary(r)["sure"] == "low"


def test_a_pick_confirmed_on_the_tie_leads_with_what_it_saves():
    """Adopted for memory at a latency inside its noise: the headline says the saving first, then the tie."""
    r = copy.deepcopy(DEMO)
    best = r["best"]["index"]
    r["confirmation"] = {
        "winner": best,
        "outcome": "confirmed",
        "verdict": "inconclusive",
        "delta": 0.116,
        "noise": 0.123,
        "tie": {"n": 3, "a": 946720768.0, "b": 425562112.0, "delta": -0.55, "noise": 0.0001, "clear": True},
        "pairs": [{"incumbent": 1.42, "candidate": 1.58}] * 3,
    }
    v = summary(r)
    assert v["headline"].startswith(f"Ship {v['ship']}: peak memory above the process baseline -55%")
    assert "+12%, noise band ±12%" in v["headline"] and "within its noise" in v["headline"]
    r["confirmation"].update(verdict="kept", delta=-0.3)  # a clear gain on the objective: that leads
    assert "peak memory" not in summary(r)["headline"]
