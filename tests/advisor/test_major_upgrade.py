"""An upgrade across a major release is not "nothing else changes": where the user saw the symptom, a move that
cures the same slow path without it comes first (real advisor runs on Mixtral-8x7B's published config, whose experts
transformers before 5.0 runs in a Python loop)."""

import json

import pytest

from infertune.advisor.advise import advise
from infertune.probe.model import profile_model
from infertune.techniques import Setup
from infertune.techniques.base import Observed
from infertune.techniques.upgrade import Upgrade
from tests.advisor.test_advise import facts
from tests.advisor.test_published_configs import CONFIGS


@pytest.fixture(scope="module")
def mixtral(tmp_path_factory):
    d = tmp_path_factory.mktemp("mixtral")
    (d / "config.json").write_text(json.dumps(CONFIGS["mixtral-8x7b"]))
    return profile_model(d)


def _on_h100s(mixtral, version, observed=None):
    f = facts(mixtral, "H100 SXM", gpus=2)
    f.packages_known, f.stated = False, {"transformers": version}
    f.observed = observed
    return f


def test_crossing_a_major_release_is_read_from_the_stated_version(mixtral):
    now = Setup(dtype="bfloat16", tp=2)
    to5 = now.model_copy(update={"packages": {"transformers": ">=5.0.0"}})
    assert Upgrade().crosses_major(_on_h100s(mixtral, "4.46.0"), now, to5)
    assert not Upgrade().crosses_major(_on_h100s(mixtral, "4.46.0"), now, to5.model_copy(update={"packages": {}}))
    assert not Upgrade().crosses_major(_on_h100s(mixtral, "4.46.0"), now, now)  # no upgrade at all


def test_a_seen_slow_decode_takes_the_engine_before_a_new_major_release(mixtral):
    now = Setup(dtype="bfloat16", tp=2)
    expected = advise(_on_h100s(mixtral, "4.46.0"), now).diagnosis.evidence["expected_tpot_s"]
    a = advise(_on_h100s(mixtral, "4.46.0", Observed(tpot_s=10 * expected)), now)
    ids = [r.technique for r in a.recommendations]
    assert a.diagnosis.bottleneck == "decode-speed"
    assert ids[0] == "serving-engine" and "upgrade" in ids and ids.index("upgrade") > 0


def test_unseen_the_upgrade_keeps_its_place(mixtral):
    # nothing observed: the cures are not put first, and the major release ranks by its own priority as before
    a = advise(_on_h100s(mixtral, "4.46.0"), Setup(dtype="bfloat16", tp=2))
    ids = [r.technique for r in a.recommendations]
    assert ids.index("upgrade") < ids.index("serving-engine")
