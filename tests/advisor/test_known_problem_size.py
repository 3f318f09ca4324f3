"""A known problem of a library version nobody stated explains an out-of-memory only where it could: the estimate
does not already say the setup does not fit, and the problem's own size (priced from its source) is about what was
missing (real advisor runs on Llama-3-8B's published config, tests/advisor/test_advise.py's facts)."""

import json

import pytest

from infertune.advisor.advise import advise
from infertune.probe.model import profile_model
from infertune.techniques import Setup
from infertune.techniques.base import Observed
from infertune.techniques.upgrade import KNOWN_PROBLEMS
from tests.advisor.test_advise import LLAMA3_8B, facts

MASK = next(p for p in KNOWN_PROBLEMS if p.fixed == "4.40.0")  # Llama's max-position-squared causal mask


def _profile(tmp_path_factory, name, **over):
    d = tmp_path_factory.mktemp(name)
    (d / "config.json").write_text(json.dumps({**LLAMA3_8B, **over}))
    return profile_model(d)


@pytest.fixture(scope="module")
def llama8k(tmp_path_factory):
    return _profile(tmp_path_factory, "llama-8k")


@pytest.fixture(scope="module")
def llama128k(tmp_path_factory):
    return _profile(tmp_path_factory, "llama-128k", max_position_embeddings=131072)


def _elsewhere(f):
    f.packages_known = False  # another machine: its transformers is nobody's statement
    f.observed = Observed(oom="load")
    return f


def _upgrade_rank(a) -> int | None:
    ids = [r.technique for r in a.recommendations]
    return ids.index("upgrade") if "upgrade" in ids else None


def test_the_mask_is_priced_from_the_positions(llama8k, llama128k):
    small = facts(llama8k, "A100 80GB")
    big = facts(llama128k, "A100 80GB")
    s = Setup(dtype="bfloat16")
    assert MASK.extra_bytes is not None
    assert MASK.extra_bytes(small, s) == 8192**2 * 3  # the bool buffer and one bf16 copy for batch 1
    assert MASK.extra_bytes(big, s) == 256 * MASK.extra_bytes(small, s)


def test_a_small_unstated_problem_is_no_cause_of_an_oom_with_room_to_spare(llama8k):
    f = _elsewhere(facts(llama8k, "A100 80GB"))
    a = advise(f, Setup(dtype="bfloat16"))
    assert a.diagnosis.bottleneck == "load-memory" and _upgrade_rank(a) is not None  # offered, as a last resort
    assert a.next is not None and a.next.technique != "upgrade"  # 0.2 GiB of mask does not fill ~60 GiB


def test_a_large_unstated_problem_stays_a_candidate_cause(llama128k):
    f = _elsewhere(facts(llama128k, "A100 80GB"))
    a = advise(f, Setup(dtype="bfloat16"))
    assert a.next is not None and a.next.technique == "upgrade"  # 48 GiB of mask at 128k positions
    assert any("Which transformers version" in q for q in a.questions)


def test_an_oom_the_estimate_already_explains_puts_the_unstated_problem_last(llama8k):
    f = _elsewhere(facts(llama8k, "T4"))  # 16-bit 8B weights do not fit 15 GB: the estimate says why
    a = advise(f, Setup(dtype="float16"))
    rank = _upgrade_rank(a)
    assert a.next is not None and a.next.technique != "upgrade"
    assert rank is None or all(r.technique == "upgrade" for r in a.recommendations[rank:])


def _slow(f, factor=10):
    f.packages_known = False
    expected = advise(f, Setup(dtype="bfloat16")).diagnosis.evidence["expected_tpot_s"]
    f.observed = Observed(tpot_s=factor * expected)
    return f


def test_a_small_unstated_problem_is_no_cause_of_a_slow_step(llama8k):
    a = advise(_slow(facts(llama8k, "A100 80GB")), Setup(dtype="bfloat16"))
    assert a.diagnosis.bottleneck == "decode-speed"
    assert a.next is None or a.next.technique != "upgrade"  # a 0.2 GB mask beside 16 GB of weights: ~1 % a step


def test_a_large_unstated_problem_stays_a_cause_of_a_slow_step(llama128k):
    a = advise(_slow(facts(llama128k, "A100 80GB")), Setup(dtype="bfloat16"))
    assert a.next is not None and a.next.technique == "upgrade"
