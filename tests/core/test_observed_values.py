"""--observed KEY=VALUE as people write it: read once in core.validate, refused in one line when unreadable."""

import pytest

from infertune.core.errors import UserError
from infertune.core.validate import observations


@pytest.mark.parametrize(
    "item, key, value",
    [
        ("tpot=220ms", "tpot", 0.22),
        ("tpot=0.5 s", "tpot", 0.5),
        ("ttft=1.5s", "ttft", 1.5),
        ("e2e=12s", "e2e", 12.0),
        ("e2e=2min", "e2e", 120.0),
        ("tokens_per_s=18 tok/s", "tokens_per_s", 18.0),
        ("tokens-per-s=18", "tokens_per_s", 18.0),
        ("peak=23GiB", "peak", 23 * 2**30),
        ("peak=23 GB", "peak", 23e9),
        ("PEAK=512MiB", "peak", 512 * 2**20),
    ],
)
def test_values_as_people_write_them(item, key, value):
    assert observations([item]) == {key: pytest.approx(value)}


def test_a_mapping_reads_the_same_and_passes_the_oom_phase():
    got = observations({"tpot": "220ms", "tokens_per_s": 18, "oom": "Decode"})
    assert got == {"tpot": pytest.approx(0.22), "tokens_per_s": 18.0, "oom": "decode"}


@pytest.mark.parametrize(
    "given, needle",
    [
        (["speed=fast"], "unknown key 'speed'; keys: tpot, ttft, e2e, tokens_per_s, peak"),
        (["tpot=220"], "say the unit"),
        ({"tpot": 0.22}, "say the unit"),
        (["tpot=-3ms"], "cannot read it"),
        (["peak=0GiB"], "must be above zero"),
        (["peak=23"], "cannot read it"),
        (["tokens_per_s=fast"], "cannot read it"),
        (["tpot=1ms", "tpot=2ms"], "given twice"),
        (["tpot"], "expected KEY=VALUE"),
        ({"oom": "later"}, "--oom later"),
        ("tpot=220ms", "as a list"),
    ],
)
def test_bad_values_are_one_line(given, needle):
    with pytest.raises(UserError) as e:
        observations(given)
    assert needle in str(e.value) and "\n" not in str(e.value)
