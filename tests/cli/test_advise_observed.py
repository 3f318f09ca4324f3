"""`infertune advise --observed/--oom/--cpu`: the CLI, the API and a run file's observed: section give one answer."""

import json

from infertune import api
from tests.cli.test_bad_input import invoke


def test_the_cli_takes_what_the_user_saw(tiny_model, tmp_path):
    kind, code, err = invoke(
        "advise", "--model", str(tiny_model), "--gpu", "L4", "--observed", "tpot=2s", "--observed", "peak=1GiB",
        "--format", "json", "--no-input", cwd=tmp_path,
    )  # fmt: skip
    assert (kind, code) == ("exit", 0), err


def test_flags_api_and_run_file_agree(tiny_model, tmp_path):
    by_list = api.advise(model=str(tiny_model), gpu="L4", observed=["tpot=2s", "tokens_per_s=0.5"], oom=None)
    by_dict = api.advise(model=str(tiny_model), gpu="L4", observed={"tpot": "2000 ms", "tokens_per_s": 0.5})
    wl = tmp_path / "run.yaml"
    wl.write_text(f"model: {tiny_model}\nobserved:\n  tpot: 2s\n  tokens_per_s: 0.5\n")
    by_file = api.advise(wl, gpu="L4")
    for a in (by_list, by_dict, by_file):
        assert a.diagnosis.evidence["observed_tpot_s"] == 2.0
        assert a.diagnosis.bottleneck == "decode-speed" and a.diagnosis.ranked[0].severity == "major"
    wl.write_text(f"model: {tiny_model}\nobserved:\n  oom: load\n")
    assert api.advise(wl, gpu="L4").diagnosis.bottleneck == "load-memory"
    flagged = api.advise(wl, gpu="L4", observed=["tpot=2s"])  # the flags' keys on top of the file's
    assert flagged.diagnosis.evidence["observed_oom"] == "load" and flagged.diagnosis.evidence["observed_tpot_s"] == 2


def test_a_cpu_target_by_name(tiny_model):
    a = api.advise(model=str(tiny_model), cpu="Graviton3", cpu_ram="32GiB")
    assert a.hardware["accelerator"] == "Graviton3" and a.hardware["platform"] == "cpu"
    assert a.hardware["memory_bytes"] == 32 * 2**30 and a.hardware["cpu_ram_bytes"] == 32 * 2**30
    assert not any("this host" in line for line in a.assumptions)
