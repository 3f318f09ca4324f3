"""infertune doctor: each rule fires on the mistake and stays silent on the correct version of the same code."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infertune import doctor
from infertune.doctor.env import check_environment
from infertune.doctor.rules import RULES, Target
from infertune.probe.hardware import GPU, Hardware

DATA = Path(__file__).parent / "data" / "doctor"
HEAD = "import torch\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
LOAD = 'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto")\n'

# rule -> (code with the mistake, the same code done right); HEAD is prepended to both
CASES = {
    "IT001": ('m = AutoModelForCausalLM.from_pretrained("m", device_map="auto")',
              'm = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16, device_map="auto")'),
    "IT002": ('model = AutoModelForCausalLM.from_pretrained("m", dtype="auto")\nmodel.eval()',
              'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto")\nmodel.to("cuda")'),
    "IT003": ('tok = AutoTokenizer.from_pretrained("m")\nids = tok(f"User: {q}\\nAssistant:")',
              'tok = AutoTokenizer.from_pretrained("m")\n'
              'ids = tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True)'),
    "IT004": (LOAD + 'out = model.generate(**inputs)\nprint(tok.decode(out[0], skip_special_tokens=True))',
              LOAD + 'out = model.generate(**inputs)\nprint(tok.decode(out[0, n:], skip_special_tokens=True))'),
    "IT005": (LOAD + 'from transformers import TextIteratorStreamer\ns = TextIteratorStreamer(tok)\n'
              'model.generate(**inputs, streamer=s)\nfor t in s:\n    print(t)',
              LOAD + 'from threading import Thread\nfrom transformers import TextIteratorStreamer\n'
              's = TextIteratorStreamer(tok)\n\ndef run():\n    model.generate(**inputs, streamer=s)\n\n'
              'Thread(target=run).start()\nfor t in s:\n    print(t)'),
    "IT006": (LOAD + 'model = torch.compile(model)\nmodel.generate(**inputs)',
              LOAD + 'model.generate(**inputs, cache_implementation="static")'),
    "IT007": ('m = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto", '
              'max_memory={0: "80GiB", "cpu": "200GiB"})',
              'm = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto", '
              'max_memory={0: "64GiB", "cpu": "200GiB"})'),
    "IT008": ('from transformers import BitsAndBytesConfig\nq = BitsAndBytesConfig(load_in_4bit=True)',
              'from transformers import BitsAndBytesConfig\n'
              'q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)'),
    "IT009": ('m = AutoModelForCausalLM.from_pretrained("m", dtype=torch.float32, device_map="auto", '
              'attn_implementation="flash_attention_2")',
              'm = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16, device_map="auto", '
              'attn_implementation="flash_attention_2")'),
    "IT010": (LOAD + 'out = model.generate(**inputs, max_new_tokens=64, temperature=0.7, top_k=20)',
              LOAD + 'out = model.generate(**inputs, max_new_tokens=64)'),
    "IT011": (LOAD + 'from fastapi import FastAPI\napp = FastAPI()\n\n@app.post("/chat")\n'
              'async def chat(req):\n    return model.generate(**req.inputs)',
              LOAD + 'from fastapi import FastAPI\napp = FastAPI()\n\n@app.get("/health")\n'
              'async def health():\n    return {"ok": True}'),
    "IT012": ('m = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto", trust_remote_code=True)',
              'm = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto", trust_remote_code=False)'),
}


def _check(tmp_path, code: str, name: str = "s.py", target: Target | None = None):
    f = tmp_path / name
    f.write_text(HEAD + textwrap.dedent(code) + "\n")
    return doctor.check([f], target)


def test_every_rule_has_a_case_and_a_doc_section():
    assert set(CASES) == {r.id for r in RULES}
    docs = (Path(__file__).parents[1] / "docs" / "doctor.md").read_text()
    for r in RULES:
        assert f"## {r.id} {r.name}" in docs


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_fires_on_the_mistake_and_not_on_the_fix(tmp_path, rule):
    bad, good = CASES[rule]
    found = _check(tmp_path, bad).findings
    assert [f.rule for f in found] == [rule], [f.model_dump() for f in found]
    f = found[0]
    assert f.line > 2 and f.col >= 1 and f.fix and f.path.endswith("s.py")
    assert _check(tmp_path, good).findings == []


def test_target_facts_sharpen_rules(tmp_path):
    code = ('m = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16, device_map="auto", '
            'attn_implementation="flash_attention_2", max_memory={0: "20GiB"})')
    assert _check(tmp_path, code).findings == []  # 20 GiB is no card's size; FA2 in bf16
    t4 = Target(gpu_name="T4", gpu_memory_bytes=16 * 10**9, compute_capability=7.5)
    msgs = {f.rule: f.message for f in _check(tmp_path, code, target=t4).findings}
    assert set(msgs) == {"IT007", "IT009"} and "T4" in msgs["IT007"] and "7.5" in msgs["IT009"]
    # transformers 4.x defaults to fp32: no dtype + FlashAttention cannot load
    fa = 'm = AutoModelForCausalLM.from_pretrained("m", device_map="auto", attn_implementation="flash_attention_2")'
    assert {f.rule for f in _check(tmp_path, fa, target=Target(transformers_major=4)).findings} == {"IT001", "IT009"}
    v5 = _check(tmp_path, fa, target=Target(transformers_major=5)).findings
    assert [f.rule for f in v5] == ["IT001"] and "transformers 5" in v5[0].message


def test_suppression_by_id_or_name_on_any_line_of_the_call(tmp_path):
    code = ('m = AutoModelForCausalLM.from_pretrained(  # infertune: ignore[IT001]\n'
            '    "m", device_map="auto", trust_remote_code=True)  # infertune: ignore[trust-remote-code]')
    assert _check(tmp_path, code).findings == []
    assert [f.rule for f in _check(tmp_path, code.replace("[IT001]", "[IT002]")).findings] == ["IT001"]


def test_sample_scripts_from_the_docs():
    bad = doctor.check([DATA / "bad_server.py"])
    assert {f.rule for f in bad.findings} >= {"IT002", "IT003", "IT004", "IT005", "IT006", "IT007", "IT008", "IT010",
                                             "IT011", "IT012"}
    assert doctor.check([DATA / "good.py"]).findings == []


def run(*args):
    return subprocess.run([sys.executable, "-m", "infertune", "doctor", *args], capture_output=True, text=True,
                          timeout=120)


def test_cli_text_json_and_exit_codes(tmp_path):
    r = run(str(DATA / "bad_server.py"))
    assert r.returncode == 1 and r.stdout.splitlines()[0].startswith(f"{DATA / 'bad_server.py'}:")
    first = r.stdout.splitlines()[0].split()
    assert first[0].count(":") == 2 and first[1].startswith("IT")  # file:line:col RULE message
    j = run(str(DATA), "--format", "json")
    d = json.loads(j.stdout)
    assert j.returncode == 1 and d["files"] == 2 and d["schema_version"] == "1"
    assert set(d["findings"][0]) == {"path", "line", "col", "rule", "message", "fix"}
    clean = run(str(DATA / "good.py"))
    assert clean.returncode == 0 and clean.stdout == "" and "no findings in 1 file" in clean.stderr


def test_unreadable_input_is_one_clear_error(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n    pass\n")
    r = run(str(broken))
    assert r.returncode == 2 and "broken.py:1:7: syntax error" in r.stderr and "Traceback" not in r.stderr
    missing = run(str(tmp_path / "nope.py"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    binary = tmp_path / "b.py"
    binary.write_bytes(b"\xff\xfe\x00")
    assert run(str(binary)).returncode == 2
    assert run().returncode == 2  # nothing to check


def test_settings_of_a_script_become_an_advise_run(tmp_path, tiny_model):
    s = tmp_path / "app.py"
    s.write_text(HEAD + f'model = AutoModelForCausalLM.from_pretrained("{tiny_model}", dtype=torch.float32, '
                 'device_map="auto", attn_implementation="eager")\n'
                 'out = model.generate(**inputs, max_new_tokens=64, cache_implementation="static")\n')
    assert doctor.settings(doctor.parse(s)) == {"model": str(tiny_model), "dtype": "float32", "attn": "eager",
                                                "device_map": "auto", "max_new_tokens": "64", "kv_cache": "static",
                                                "compile": True}
    r = run(str(s), "--advise", "--format", "json")
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)["advice"]
    assert row["command"].startswith("infertune advise --no-input --model ")
    advice = row["advice"]
    assert advice["kind"] == "advice" and advice["current"]["dtype"] == "float32"
    assert advice["current"]["attn"] == "eager" and advice["current"]["kv_cache"] == "static"
    assert "--device-map auto" in row["command"] and advice["current"]["device_map"] is None  # one GPU: one device
    nowhere = tmp_path / "other.py"
    nowhere.write_text(HEAD + 'model = AutoModelForCausalLM.from_pretrained("no-such/model", dtype="auto", '
                       'device_map="auto")\n')
    r = run(str(nowhere), "--advise")
    assert r.returncode == 0 and "cannot advise" in r.stderr and "Traceback" not in r.stderr


def _hw(gpus=(), mps=False):
    return Hardware(platform="Linux", cpu_model="x", cpu_logical_cores=2, cpu_physical_cores=2,
                    ram_total_bytes=32 * 2**30, ram_available_bytes=16 * 2**30, gpus=list(gpus), mps=mps)


def test_environment_checks_with_injected_facts():
    ok = {"torch": "2.6.0", "transformers": "5.2.0"}
    gpu = GPU(index=0, name="NVIDIA L4", total_memory_bytes=24 * 2**30, free_memory_bytes=22 * 2**30,
              compute_capability="8.9", bf16=True)
    assert check_environment(_hw([gpu]), ok, lambda: True) == []
    rules = {f.rule: f for f in check_environment(_hw(), {**ok, "torch": "2.6.0+cpu", "flash-attn": "2.7"},
                                                  lambda: True)}
    assert set(rules) == {"ENV003", "ENV004", "ENV005"} and "CPU-only torch build" in rules["ENV003"].message
    assert [f.rule for f in check_environment(_hw(), {"torch": None, "transformers": None}, lambda: False)] == \
        ["ENV001", "ENV001", "ENV004"]
    big = check_environment(_hw([gpu]), ok, lambda: True, model_bytes=30 * 2**30, model="big")
    assert [f.rule for f in big] == ["ENV006"] and "22.0 GiB free" in big[0].message
    # the installed transformers' own torch requirement, read from its metadata, against an old torch
    old = check_environment(_hw([gpu]), {"torch": "1.13.0", "transformers": "5.2.0"}, lambda: True)
    assert [f.rule for f in old] == ["ENV002"] and "transformers" in old[0].message


def test_chat_templates_token_names_and_patterns_are_not_prompts(tmp_path):
    code = ('TEMPLATE = "{% for m in messages %}<|im_start|>{{ m.role }}\\n{{ m.content }}<|im_end|>{% endfor %}"\n'
            'specials = ["<|endoftext|>", "<|im_start|>", "[INST]"]\n'
            'import re\nMARK = re.compile(r"<\\|im_start\\|>user")')
    assert _check(tmp_path, code).findings == []


def test_sampling_rule_reads_the_models_own_generation_config_when_it_is_here(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "generation_config.json").write_text('{"temperature": 0.6, "top_p": 0.9, "do_sample": true}')
    code = (f'model = AutoModelForCausalLM.from_pretrained("{folder}", dtype="auto", device_map="auto")\n'
            'out = model.generate(**inputs, temperature=0.7, top_k=20)')
    (f,) = _check(tmp_path, code).findings
    assert f.rule == "IT010" and "temperature (model: 0.6)" in f.message and "top_k" not in f.message
    (folder / "generation_config.json").write_text('{"do_sample": false}')  # sets none: a deliberate choice
    assert _check(tmp_path, code).findings == []


def test_flash_attention_on_a_cpu_device_map(tmp_path):
    code = ('m = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16, device_map="cpu", '
            'attn_implementation="flash_attention_2")')
    (f,) = _check(tmp_path, code).findings
    assert f.rule == "IT009" and "cpu" in f.message
