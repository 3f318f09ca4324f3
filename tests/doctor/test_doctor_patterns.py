"""doctor.patterns: the rules' regular expressions kept between runs must behave exactly as `re.compile`'s."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from infertune.doctor import nodes, patterns
from infertune.doctor.rules import RULES  # noqa: F401  (imports every rule module, whose patterns are collected)


def _lazy_patterns() -> list[tuple[str, int]]:
    found = set()
    for name, mod in list(sys.modules.items()):
        if name.startswith("infertune.doctor"):
            for value in vars(mod).values():
                if isinstance(value, nodes._Lazy):
                    found.add((value.pattern, int(value.flags)))
    return sorted(found)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.delenv("INFERTUNE_NO_DOCTOR_CACHE", raising=False)
    monkeypatch.setenv("INFERTUNE_HOME", str(tmp_path))
    monkeypatch.setattr(patterns, "_programs", None)
    monkeypatch.setattr(patterns, "_added", True)  # no save at this process's exit: the tests save by hand
    return Path(patterns.path())


def test_kept_programs_match_re_compile(store):
    rules = _lazy_patterns()
    assert len(rules) >= 30
    for p, f in rules:
        patterns.compile(p, f)
    patterns._save()
    assert store.is_file()
    patterns._programs = None  # a new run: everything comes from the file
    texts = [
        *Path(__file__).parents[2].joinpath("docs", "doctor.md").read_text().splitlines(),
        "",
        "Llama-2-7b-chat-hf",
    ]
    for p, f in rules:
        kept, fresh = patterns.compile(p, f), re.compile(p, f)
        assert (kept.pattern, kept.flags, kept.groups, kept.groupindex) == (
            fresh.pattern,
            fresh.flags,
            fresh.groups,
            fresh.groupindex,
        )
        for t in texts:
            a, b = kept.search(t), fresh.search(t)
            assert (a and (a.span(), a.groups())) == (b and (b.span(), b.groups())), (p, t)
    assert patterns._programs and all(isinstance(k, tuple) for k in patterns._programs)


def test_a_damaged_or_foreign_store_falls_back_to_re(store):
    assert patterns.compile(r"a(b)c", re.I).search("xABC").group(1) == "B"
    patterns._save()
    data = bytearray(store.read_bytes())
    data[-5] ^= 0xFF  # one byte of a program changed: still marshal data, no longer what was kept
    store.write_bytes(bytes(data))
    assert patterns._load() == {}
    store.write_bytes(b"not marshal data")
    patterns._programs = None
    assert patterns.compile(r"a(b)c", re.I).search("xABC").group(1) == "B"
    bad_opcode = b"\xff\x00\x00\x00" * 3  # a program the engine refuses
    patterns._programs = {(r"a(b)c", int(re.I)): (int(re.I), bad_opcode, 0, {}, (None,))}
    assert patterns.compile(r"a(b)c", re.I).search("xABC").group(1) == "B"


def test_the_store_is_off_with_the_findings_cache_switch(store, monkeypatch):
    monkeypatch.setenv("INFERTUNE_NO_DOCTOR_CACHE", "1")
    assert patterns.compile(r"x+", 0).fullmatch("xx")
    assert patterns._programs is None and not store.exists()


def test_a_warm_store_spares_a_check_the_re_module(tmp_path):
    """Once a run has kept the programs, a fresh check (--no-cache) compiles none and never imports `re`."""
    code = (
        "import sys; from infertune.__main__ import main\n"
        "sys.argv = ['infertune', 'doctor', '--no-cache', sys.argv[1]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('re' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "INFERTUNE_NO_DOCTOR_CACHE"} | {"INFERTUNE_HOME": str(tmp_path)}
    sample = str(Path(__file__).parents[1] / "data" / "doctor" / "bad_server.py")
    runs = [subprocess.run([sys.executable, "-c", code, sample], capture_output=True, text=True, env=env) for _ in "ab"]
    assert [r.stdout.strip().splitlines()[-1] for r in runs] == ["True", "False"], runs[1].stderr
    assert len(list(tmp_path.glob("doctor-patterns-*.marshal"))) == 1
