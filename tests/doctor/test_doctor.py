"""infertune doctor: each rule fires on the mistake and stays silent on the correct version of the same code."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infertune import doctor
from infertune.doctor.env import check_environment
from infertune.doctor.nodes import Target
from infertune.doctor.rules import RULES
from infertune.probe.hardware import GPU, Hardware

DATA = Path(__file__).parents[1] / "data" / "doctor"
HEAD = "import torch\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
LOAD = 'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto")\n'

GEN = "out = model.generate(**inputs, max_new_tokens=32)\n"
CHAT = 'tok = AutoTokenizer.from_pretrained("m")\nmsgs = [{"role": "user", "content": q}]\n'
# rule -> (code with the mistake, the same code done right); HEAD is prepended to both
CASES = {
    "IT025": (
        'tok = AutoTokenizer.from_pretrained("google/gemma-2-2b-it")\n'
        'text = tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)\n'
        'ids = tok(text, return_tensors="pt")\n',
        'tok = AutoTokenizer.from_pretrained("google/gemma-2-2b-it")\n'
        'text = tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)\n'
        'ids = tok(text, add_special_tokens=False, return_tensors="pt")\n',
    ),
    "IT031": (
        'model = AutoModelForCausalLM.from_pretrained("m", dtype=torch.float16, device_map="cpu")\n' + GEN,
        'model = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16, device_map="cpu")\n' + GEN,
    ),
    "IT024": (
        'tok = AutoTokenizer.from_pretrained("m")\ntok.padding_side = "right"\n'
        + LOAD
        + 'enc = tok(prompts, padding=True, return_tensors="pt").to("cuda")\n'
        "out = model.generate(**enc, max_new_tokens=8)\n",
        'tok = AutoTokenizer.from_pretrained("m")\ntok.padding_side = "left"\n'
        + LOAD
        + 'enc = tok(prompts, padding=True, return_tensors="pt").to("cuda")\n'
        "out = model.generate(**enc, max_new_tokens=8)\n",
    ),
    "IT026": (
        'enc = tok(texts, padding=True, return_tensors="pt")\nvec = model(**enc).last_hidden_state.mean(dim=1)\n',
        'enc = tok(texts, padding=True, return_tensors="pt")\nh = model(**enc).last_hidden_state\n'
        'm = enc["attention_mask"].unsqueeze(-1)\nvec = (h * m).sum(1) / m.sum(1)\n',
    ),
    "IT027": (
        LOAD + "while True:\n    ids = model.generate(ids, max_new_tokens=2)\n    print(ids)\n",
        LOAD + "while True:\n    ids = model.generate(ids, max_new_tokens=200)\n    print(ids)\n",
    ),
    "IT028": (
        'clf = pipeline("text-classification", model="m", device=0)\nprint(clf([a, b, c]))\n',
        'clf = pipeline("text-classification", model="m", device=0)\nprint(clf([a, b, c], batch_size=8))\n',
    ),
    "IT030": (
        'model = AutoModelForCausalLM.from_pretrained("m")\nlogits = model(**enc).logits\n',
        'model = AutoModelForCausalLM.from_pretrained("m")\nwith torch.inference_mode():\n'
        "    logits = model(**enc).logits\n",
    ),
    "IT032": (
        'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "1"\n'
        'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto").to("cuda:1")\n',
        'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "1"\n'
        'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto").to("cuda:0")\n',
    ),
    "IT033": (
        'tok = AutoTokenizer.from_pretrained("org/m-chat")\n'
        + LOAD
        + "out = model.generate(**inputs, num_beams=4, no_repeat_ngram_size=2, max_new_tokens=9)\n",
        'tok = AutoTokenizer.from_pretrained("org/m-chat")\n'
        + LOAD
        + "out = model.generate(**inputs, num_beams=4, max_new_tokens=9)\n",
    ),
    "IT034": (
        "from transformers import pipeline\n"
        'summarize = pipeline("summarization", model="facebook/bart-large-cnn")\n'
        'with open("talk.txt") as f:\n    text = f.read()\n'
        "print(summarize(text, max_length=120))\n",
        "from transformers import pipeline\n"
        'summarize = pipeline("summarization", model="facebook/bart-large-cnn")\n'
        'with open("talk.txt") as f:\n    text = f.read()\n'
        "print(summarize(text, max_length=120, truncation=True))\n",
    ),
    "IT035": (
        'model = AutoModelForCausalLM.from_pretrained("THUDM/chatglm3-6b", device_map="auto", dtype="auto")\n',
        'model = AutoModelForCausalLM.from_pretrained("THUDM/chatglm3-6b", trust_remote_code=True, revision="abc123", '
        'device_map="auto", dtype="auto")\n',
    ),
    "IT036": (LOAD + "out = model.generate(**inputs)\n", LOAD + "out = model.generate(**inputs, max_new_tokens=256)\n"),
    "IT029": (
        LOAD + "answers = [model.generate(**inputs, do_sample=True, max_new_tokens=32) for _ in range(5)]\n",
        LOAD + "out = model.generate(**inputs, do_sample=True, num_return_sequences=5, max_new_tokens=32)\n"
        "for i in range(5):\n    out = model.generate(**batches[i], do_sample=True, max_new_tokens=32)\n",
    ),
    "IT023": (
        "for q in questions:\n"
        '    model = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto")\n'
        "    model.generate(**tok(q, return_tensors='pt').to(model.device), max_new_tokens=8)\n",
        'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto")\n'
        "for q in questions:\n"
        "    model.generate(**tok(q, return_tensors='pt').to(model.device), max_new_tokens=8)\n",
    ),
    "IT001": (
        'm = AutoModelForCausalLM.from_pretrained("m", device_map="auto")',
        'm = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16, device_map="auto")',
    ),
    "IT002": (
        'model = AutoModelForCausalLM.from_pretrained("org/m-7b", dtype="auto")\nmodel.eval()\n' + GEN,
        'model = AutoModelForCausalLM.from_pretrained("org/m-7b", dtype="auto")\nmodel.to("cuda")\n' + GEN,
    ),
    "IT003": (
        LOAD + 'tok = AutoTokenizer.from_pretrained("m")\n'
        'ids = tok(f"<|im_start|>user\\n{q}<|im_end|>\\n", return_tensors="pt").to("cuda")\n'
        "model.generate(**ids, max_new_tokens=8)",
        LOAD + CHAT + 'ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt")\n'
        'model.generate(ids.to("cuda"), max_new_tokens=8)',
    ),
    "IT004": (
        LOAD + "out = model.generate(**inputs, max_new_tokens=32)\nprint(tok.decode(out[0], skip_special_tokens=True))",
        LOAD
        + "out = model.generate(**inputs, max_new_tokens=32)\nprint(tok.decode(out[0, n:], skip_special_tokens=True))",
    ),
    "IT005": (
        LOAD + "from transformers import TextIteratorStreamer\ns = TextIteratorStreamer(tok, skip_prompt=True)\n"
        "model.generate(**inputs, streamer=s, max_new_tokens=32)\nfor t in s:\n    print(t)",
        LOAD + "from threading import Thread\nfrom transformers import TextIteratorStreamer\n"
        "s = TextIteratorStreamer(tok, skip_prompt=True)\n\n"
        "def run():\n    model.generate(**inputs, streamer=s, max_new_tokens=32)\n\n"
        "Thread(target=run).start()\nfor t in s:\n    print(t)",
    ),
    "IT006": (
        LOAD + "model = torch.compile(model)\nmodel.generate(**inputs, max_new_tokens=32)",
        LOAD + 'model.generate(**inputs, cache_implementation="static", max_new_tokens=32)',
    ),
    "IT007": (
        'm = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto", '
        'max_memory={0: "80GiB", "cpu": "200GiB"})',
        'm = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto", '
        'max_memory={0: "64GiB", "cpu": "200GiB"})',
    ),
    "IT008": (
        "from transformers import BitsAndBytesConfig\nq = BitsAndBytesConfig(load_in_4bit=True)",
        "from transformers import BitsAndBytesConfig\n"
        "q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)",
    ),
    "IT009": (
        'm = AutoModelForCausalLM.from_pretrained("m", dtype=torch.float32, device_map="auto", '
        'attn_implementation="flash_attention_2")',
        'm = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16, device_map="auto", '
        'attn_implementation="flash_attention_2")',
    ),
    "IT010": (
        LOAD + "out = model.generate(**inputs, max_new_tokens=64, do_sample=True, top_k=20)",
        LOAD + "out = model.generate(**inputs, max_new_tokens=64, do_sample=True)",
    ),
    "IT011": (
        LOAD + 'from fastapi import FastAPI\napp = FastAPI()\n\n@app.post("/chat")\n'
        "def chat(req):\n    return model.generate(**req.inputs, max_new_tokens=32)",
        LOAD + 'from fastapi import FastAPI\napp = FastAPI()\n\n@app.get("/health")\n'
        'async def health():\n    return {"ok": True}',
    ),
    "IT012": (
        'm = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-v0.1", dtype="auto", trust_remote_code=True,\n'
        '                                         device_map="auto")',
        'm = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-v0.1", dtype="auto", trust_remote_code=False,\n'
        '                                         device_map="auto")',
    ),
    "IT013": (
        'tok = AutoTokenizer.from_pretrained("org/Model-7B-Instruct")\n'
        'model = AutoModelForCausalLM.from_pretrained("org/Model-7B-Instruct", dtype="auto", device_map="auto")\n'
        'ids = tok(q, return_tensors="pt").to(model.device)\nmodel.generate(**ids, max_new_tokens=8)',
        'tok = AutoTokenizer.from_pretrained("org/Model-7B-Instruct")\n'
        'model = AutoModelForCausalLM.from_pretrained("org/Model-7B-Instruct", dtype="auto", device_map="auto")\n'
        'msgs = [{"role": "user", "content": q}]\n'
        'ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt").to(model.device)\n'
        "model.generate(ids, max_new_tokens=8)",
    ),
    "IT014": (LOAD + "model.generate(**inputs, max_length=64)", LOAD + "model.generate(**inputs, max_new_tokens=64)"),
    "IT015": (
        LOAD + "model.generate(**inputs, max_new_tokens=8, num_beams=4, top_p=cfg.top_p)",
        LOAD + "model.generate(**inputs, max_new_tokens=8, num_beams=4)",
    ),
    "IT016": (
        LOAD + 'tok = AutoTokenizer.from_pretrained("m")\nenc = tok(q, return_tensors="pt")\n'
        "model.generate(**enc, max_new_tokens=8)",
        LOAD + 'tok = AutoTokenizer.from_pretrained("m")\nenc = tok(q, return_tensors="pt").to(model.device)\n'
        "model.generate(**enc, max_new_tokens=8)",
    ),
    "IT017": (
        LOAD
        + "from transformers import TextStreamer\nmodel.generate(**inputs, streamer=TextStreamer(tok), max_new_tokens=32)",
        LOAD + "from transformers import TextStreamer\n"
        "model.generate(**inputs, streamer=TextStreamer(tok, skip_prompt=True), max_new_tokens=32)",
    ),
    "IT018": (
        LOAD
        + CHAT
        + 'ids = tok.apply_chat_template(msgs, return_tensors="pt")\nmodel.generate(ids.to("cuda"), max_new_tokens=32)',
        LOAD + CHAT + 'ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt")\n'
        'model.generate(ids.to("cuda"), max_new_tokens=32)',
    ),
    "IT019": (
        LOAD + "model.generate(**inputs, max_tokens=64, frequency_penalty=0.5)",
        LOAD + "model.generate(**inputs, max_new_tokens=64)",
    ),
    "IT020": (LOAD + "model = model.half()", LOAD + "model.eval()"),
    "IT021": (
        'tok = AutoTokenizer.from_pretrained("m", attn_implementation="sdpa")',
        'tok = AutoTokenizer.from_pretrained("m")',
    ),
    "IT022": (
        LOAD + "async def on_message(inputs):\n    return model.generate(**inputs, max_new_tokens=32)",
        LOAD + "import asyncio\n\nasync def on_message(inputs):\n"
        "    return await asyncio.to_thread(model.generate, **inputs)",
    ),
}


def _check(tmp_path, code: str, name: str = "s.py", target: Target | None = None):
    f = tmp_path / name
    f.write_text(HEAD + textwrap.dedent(code) + "\n")
    return doctor.check([f], target, select=["ALL"])  # every rule, the advisory ones off by default too


def test_every_rule_has_a_case_and_a_doc_section():
    assert set(CASES) == {r.id for r in RULES}
    docs = (Path(__file__).parents[2] / "docs" / "doctor.md").read_text()
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


def _v(version: str) -> Target:
    v = tuple(int(x) for x in version.split("."))
    return Target(transformers_min=v, transformers_max=v, version_source="--target-version")


def test_target_facts_sharpen_rules(tmp_path):
    code = (
        'm = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16, device_map="auto", '
        'attn_implementation="flash_attention_2", max_memory={0: "20GiB"})'
    )
    assert _check(tmp_path, code).findings == []  # 20 GiB is no card's size; FA2 in bf16
    t4 = Target(gpu_name="T4", gpu_memory_bytes=16 * 10**9, compute_capability=7.5)
    msgs = {f.rule: f.message for f in _check(tmp_path, code, target=t4).findings}
    assert set(msgs) == {"IT007", "IT009"} and "T4" in msgs["IT007"] and "7.5" in msgs["IT009"]
    # transformers 4.x defaults to fp32: no dtype + FlashAttention cannot load
    fa = 'm = AutoModelForCausalLM.from_pretrained("m", device_map="auto", attn_implementation="flash_attention_2")'
    assert {f.rule for f in _check(tmp_path, fa, target=_v("4.46")).findings} == {"IT001", "IT009"}
    assert _check(tmp_path, fa, target=_v("5.2")).findings == []  # 5.x loads the checkpoint's dtype


def test_suppression_by_id_or_name_on_any_line_of_the_call(tmp_path):
    code = (
        "m = AutoModelForCausalLM.from_pretrained(  # infertune: ignore[IT001]\n"
        '    "m", device_map="auto", trust_remote_code=True)  # infertune: ignore[trust-remote-code]'
    )
    assert _check(tmp_path, code).findings == []
    assert [f.rule for f in _check(tmp_path, code.replace("[IT001]", "[IT002]")).findings] == ["IT001"]


def test_sample_scripts_from_the_docs():
    bad = doctor.check([DATA / "bad_server.py"], select=["ALL"])
    assert {f.rule for f in bad.findings} >= {
        "IT002",
        "IT003",
        "IT004",
        "IT005",
        "IT006",
        "IT007",
        "IT008",
        "IT010",
        "IT011",
        "IT012",
        "IT013",
        "IT015",
        "IT017",
    }
    assert doctor.check([DATA / "good.py"]).findings == []


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "infertune", "doctor", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_text_json_and_exit_codes(tmp_path):
    r = run(str(DATA / "bad_server.py"))
    assert r.returncode == 1 and r.stdout.splitlines()[0].startswith(f"{DATA / 'bad_server.py'}:")
    first = r.stdout.splitlines()[0].split()
    assert first[0].count(":") == 2 and first[1].startswith("IT")  # file:line:col RULE message
    j = run(str(DATA / "bad_server.py"), str(DATA / "good.py"), "--format", "json")
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
    s.write_text(
        HEAD + f'model = AutoModelForCausalLM.from_pretrained("{tiny_model}", dtype=torch.float32, '
        'device_map="auto", attn_implementation="eager")\n'
        'out = model.generate(**inputs, max_new_tokens=64, cache_implementation="static")\n'
    )
    assert doctor.settings(doctor.parse(s)) == {
        "model": str(tiny_model),
        "dtype": "float32",
        "attn": "eager",
        "device_map": "auto",
        "max_new_tokens": "64",
        "kv_cache": "static",
        "compile": True,
    }
    r = run(str(s), "--advise", "--format", "json")
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)["advice"]
    assert row["command"].startswith("infertune advise --no-input --model ")
    advice = row["advice"]
    assert advice["kind"] == "advice" and advice["current"]["dtype"] == "float32"
    assert advice["current"]["attn"] == "eager" and advice["current"]["kv_cache"] == "static"
    assert "--device-map auto" in row["command"] and advice["current"]["device_map"] is None  # one GPU: one device
    nowhere = tmp_path / "other.py"
    nowhere.write_text(
        HEAD + 'model = AutoModelForCausalLM.from_pretrained("no-such/model", dtype="auto", device_map="auto")\n'
    )
    r = run(str(nowhere), "--advise")
    assert r.returncode == 0 and "cannot advise" in r.stderr and "Traceback" not in r.stderr


def _hw(gpus=(), mps=False):
    return Hardware(
        platform="Linux",
        cpu_model="x",
        cpu_logical_cores=2,
        cpu_physical_cores=2,
        ram_total_bytes=32 * 2**30,
        ram_available_bytes=16 * 2**30,
        gpus=list(gpus),
        mps=mps,
    )


def test_environment_checks_with_injected_facts():
    ok = {"torch": "2.6.0", "transformers": "5.2.0"}
    gpu = GPU(
        index=0,
        name="NVIDIA L4",
        total_memory_bytes=24 * 2**30,
        free_memory_bytes=22 * 2**30,
        compute_capability="8.9",
        bf16=True,
    )
    assert check_environment(_hw([gpu]), ok, lambda: True) == []
    rules = {
        f.rule: f for f in check_environment(_hw(), {**ok, "torch": "2.6.0+cpu", "flash-attn": "2.7"}, lambda: True)
    }
    assert set(rules) == {"ENV003", "ENV004", "ENV005"} and "CPU-only torch build" in rules["ENV003"].message
    assert [f.rule for f in check_environment(_hw(), {"torch": None, "transformers": None}, lambda: False)] == [
        "ENV001",
        "ENV001",
        "ENV004",
    ]
    big = check_environment(_hw([gpu]), ok, lambda: True, model_bytes=30 * 2**30, model="big")
    assert [f.rule for f in big] == ["ENV006"] and "22.0 GiB free" in big[0].message
    # the installed transformers' own torch requirement, read from its metadata, against an old torch
    old = check_environment(_hw([gpu]), {"torch": "1.13.0", "transformers": "5.2.0"}, lambda: True)
    assert [f.rule for f in old] == ["ENV002"] and "transformers" in old[0].message


def test_chat_templates_token_names_and_patterns_are_not_prompts(tmp_path):
    code = (
        'TEMPLATE = "{% for m in messages %}<|im_start|>{{ m.role }}\\n{{ m.content }}<|im_end|>{% endfor %}"\n'
        'specials = ["<|endoftext|>", "<|im_start|>", "[INST]"]\n'
        'import re\nMARK = re.compile(r"<\\|im_start\\|>user")'
    )
    assert _check(tmp_path, code).findings == []


def _local_checkpoint(tmp_path, generation_config: str):
    """A checkpoint folder here (config.json, generation_config.json) and the line that loads it."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "generation_config.json").write_text(generation_config)
    return folder, f'model = AutoModelForCausalLM.from_pretrained("{folder}", dtype="auto", device_map="auto")\n'


def test_sampling_rule_reads_the_models_own_generation_config_when_it_is_here(tmp_path):
    folder, load = _local_checkpoint(tmp_path, '{"temperature": 0.6, "top_p": 0.9, "do_sample": true}')
    code = load + "out = model.generate(**inputs, do_sample=True, temperature=0.7, top_k=20, max_new_tokens=64)"
    (f,) = _check(tmp_path, code).findings
    assert f.rule == "IT010" and "temperature (model: 0.6)" in f.message and "top_k" not in f.message
    (folder / "generation_config.json").write_text('{"do_sample": false}')  # sets none: a deliberate choice
    assert _check(tmp_path, code).findings == []


def test_default_length_reads_the_models_own_generation_config_when_it_is_here(tmp_path):
    """IT036: no length in the call; the checkpoint's generation_config.json decides whether 20 tokens is the cap."""
    folder, load = _local_checkpoint(tmp_path, '{"do_sample": false}')
    code = load + "out = model.generate(**inputs)"
    (f,) = _check(tmp_path, code).findings
    assert f.rule == "IT036" and f.line == 4
    (folder / "generation_config.json").write_text('{"max_new_tokens": 512}')  # the checkpoint sets one
    assert _check(tmp_path, code).findings == []


def test_flash_attention_on_a_cpu_device_map(tmp_path):
    code = (
        'm = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16, device_map="cpu", '
        'attn_implementation="flash_attention_2")'
    )
    (f,) = _check(tmp_path, code).findings
    assert f.rule == "IT009" and "cpu" in f.message


def test_pins_beside_or_above_the_script_choose_the_dtype_message(tmp_path):
    app = tmp_path / "svc" / "app"
    app.mkdir(parents=True)
    script = app / "main.py"
    script.write_text(
        HEAD + 'm = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\n'
        'n = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16, device_map="auto")\n'
        'o = AutoModelForCausalLM.from_pretrained("m", dtype=torch.float16, device_map="auto")\n'
    )
    (tmp_path / "svc" / "requirements.txt").write_text("accelerate\ntransformers==4.46.3\n")
    v4 = {f.line: f.message for f in doctor.check([script]).findings}
    assert list(v4) == [3, 5] and "4.x" in v4[3] and "requirements.txt" in v4[3] and "4.56" in v4[5]
    assert "pass torch_dtype=" in v4[3]  # the keyword this version reads
    (tmp_path / "svc" / "requirements.txt").unlink()
    (tmp_path / "svc" / "pyproject.toml").write_text('[project]\ndependencies = ["transformers>=5.0,<6"]\n')
    assert doctor.check([script]).findings == []  # 5.x: the checkpoint's dtype; torch_dtype still read
    # --target-version wins over the pins
    assert [f.line for f in doctor.check([script], target_version="4.40").findings] == [3, 5]


def test_version_ranges_from_specifiers():
    from infertune.doctor.version import spec_range

    assert spec_range(">=4.40,<5") == ((4, 40), (4, 9999))
    assert spec_range("==4.46.3") == ((4, 46, 3), (4, 46, 3))
    assert spec_range("~=4.46.0") == ((4, 46, 0), (4, 46, 9999))
    assert spec_range("^4.38") == ((4, 38), (4, 9999))
    assert spec_range(">=5") == ((5,), None)


def test_select_and_ignore_like_ruff(tmp_path):
    script = DATA / "bad_server.py"
    only = {f.rule for f in doctor.check([script], select=["IT01"]).findings}
    assert only and all(r.startswith("IT01") for r in only)
    assert "IT012" not in {f.rule for f in doctor.check([script], ignore=["trust-remote-code"]).findings}
    with pytest.raises(ValueError, match="unknown rule"):
        doctor.check([script], select=["IT999"])
    r = run(str(script), "--select", "IT012,IT001", "--format", "json")
    assert r.returncode == 1 and {f["rule"] for f in json.loads(r.stdout)["findings"]} == {"IT001", "IT012"}
    bad = run(str(script), "--select", "nope")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown rule" in bad.stderr


def test_sarif_output_validates_against_the_sarif_2_1_0_structure(tmp_path):
    import jsonschema

    schema = json.loads((DATA / "sarif-2.1.0-subset.schema.json").read_text())
    r = run(str(DATA / "bad_server.py"), "--format", "sarif")
    assert r.returncode == 1  # findings (an unreadable input is refused in one line: test_doctor_io.py)
    log = json.loads(r.stdout)
    jsonschema.validate(log, schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    run_ = log["runs"][0]
    ids = [rule["id"] for rule in run_["tool"]["driver"]["rules"]]
    assert ids == [r.id for r in RULES] and run_["results"]
    for res in run_["results"]:
        assert ids[res["ruleIndex"]] == res["ruleId"]
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"].endswith("bad_server.py") and loc["region"]["startLine"] >= 1
    clean = json.loads(run(str(DATA / "good.py"), "--format", "sarif").stdout)
    jsonschema.validate(clean, schema)
    assert clean["runs"][0]["results"] == []
    clean["runs"][0]["tool"]["driver"]["ruleCount"] = 22  # not a SARIF property: the schema catches it
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(clean, schema)


def test_doctor_never_imports_torch_transformers_or_pydantic(tmp_path):
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "infertune", "doctor", str(DATA / "good.py")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    modules = {line.split("|")[-1].strip().split(".")[0] for line in r.stderr.splitlines() if "import time:" in line}
    assert "infertune" in modules and not modules & {"torch", "transformers", "pydantic", "typer", "rich", "numpy"}


def test_pre_commit_hooks_run_the_doctor_on_python_files():
    import yaml  # a transformers dependency

    hooks = yaml.safe_load((Path(__file__).parents[2] / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["infertune-doctor", "infertune-doctor-system"]
    for h in hooks:  # the keys pre-commit requires, and files it passes as arguments
        assert {"id", "name", "entry", "language"} <= set(h) and h["entry"] == "infertune doctor"
        assert h["types"] == ["python"] and h["language"] in ("python", "system")


def test_a_failing_rule_is_reported_and_the_others_still_run(tmp_path, monkeypatch):
    from infertune.doctor import rules as rules_mod

    def boom(s):
        raise ValueError("boom")
        yield

    broken = [rules_mod.Rule("IT012", "trust-remote-code", "x", "y", boom)] + rules_mod.RULES[:1]
    monkeypatch.setattr(rules_mod, "RULES", broken)
    monkeypatch.setattr("infertune.doctor.checker.select_rules", lambda select, ignore: broken)
    report = doctor.check([DATA / "bad_server.py"])
    assert [f.rule for f in report.findings] == ["IT001"]
    assert len(report.errors) == 1 and "rule IT012 failed (ValueError: boom)" in report.errors[0]


def test_keyword_findings_point_at_the_argument_and_a_comment_on_the_call_silences_them(tmp_path):
    code = LOAD + "out = model.generate(\n    **inputs,\n    max_length=64,\n)"
    (f,) = _check(tmp_path, code).findings
    assert f.rule == "IT014" and f.line == 6  # the max_length line, as ruff points at the argument
    assert _check(tmp_path, code.replace("generate(", "generate(  # infertune: ignore[IT014]")).findings == []


def test_folders_are_walked_without_tool_and_hidden_folders(tmp_path):
    for rel in ("pkg/a.py", "pkg/sub/b.py", ".venv/c.py", "build/d.py", ".hidden/e.py", "node_modules/f.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(HEAD)
    (tmp_path / "pkg" / "notes.txt").write_text("x")
    files, errors = doctor.python_files([tmp_path])
    assert sorted(f.relative_to(tmp_path).as_posix() for f in files) == ["pkg/a.py", "pkg/sub/b.py"] and not errors


def test_advisory_rules_are_off_unless_selected(tmp_path):
    """IT010 was wrong more often than right on real scripts: it speaks only when selected."""
    code = CASES["IT010"][0]
    f = tmp_path / "s.py"
    f.write_text(HEAD + textwrap.dedent(code) + "\n")
    assert "IT010" not in {x.rule for x in doctor.check([f]).findings}
    for select in (["IT010"], ["IT01"], ["hardcoded-sampling"], ["ALL"]):
        assert "IT010" in {x.rule for x in doctor.check([f], select=select).findings}, select
    f.write_text(HEAD + textwrap.dedent(CASES["IT011"][0]) + "\n")  # IT011 reads what it serves: on by default
    assert "IT011" in {x.rule for x in doctor.check([f]).findings}


def test_trust_remote_code_only_on_transformers_loaders_of_native_checkpoints(tmp_path):
    def rules(code: str) -> list[str]:
        return [x.rule for x in _check(tmp_path, code).findings if x.rule == "IT012"]

    assert rules('tok = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-7B-Instruct", trust_remote_code=True)') == ["IT012"]
    assert rules('tok = AutoTokenizer.from_pretrained("Qwen/Qwen-7B-Chat", trust_remote_code=True)') == []  # Qwen 1
    assert rules('m = AutoModelForCausalLM.from_pretrained("microsoft/Florence-2-base", trust_remote_code=True)') == []
    assert rules("tok = AutoTokenizer.from_pretrained(path, trust_remote_code=True)") == []  # unknown checkpoint
    assert rules('import datasets\nd = datasets.load_dataset("x/y", trust_remote_code=True)') == []
    argparse_default = (
        "import argparse\np = argparse.ArgumentParser()\n"
        'p.add_argument("--model", default="meta-llama/Meta-Llama-3-8B-Instruct")\n'
        'p.add_argument("--trust-remote-code", action="store_true", default=True)\nargs = p.parse_args()\n'
        "tok = AutoTokenizer.from_pretrained(args.model, trust_remote_code=args.trust_remote_code)"
    )
    assert rules(argparse_default) == ["IT012"]


def test_a_small_model_on_a_cpu_script_is_a_choice_a_7b_is_not(tmp_path):
    small = 'model = AutoModelForCausalLM.from_pretrained("distilgpt2")\n' + GEN
    assert "IT002" not in {x.rule for x in _check(tmp_path, small).findings}
    big = 'model = AutoModelForCausalLM.from_pretrained("mistralai/Mixtral-8x7B-v0.1")\n' + GEN
    assert "IT002" in {x.rule for x in _check(tmp_path, big).findings}
    meant_for_gpu = small + '\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
    assert "IT002" in {x.rule for x in _check(tmp_path, meant_for_gpu).findings}


def test_a_checkpoint_here_without_a_chat_template_silences_the_template_rules(tmp_path):
    """A model whose only format is a hand-built prompt (no chat template shipped) is not told to use one."""
    folder = tmp_path / "mesh-chat"
    folder.mkdir()
    code = (
        f"tok = AutoTokenizer.from_pretrained({str(folder)!r})\n"
        f'model = AutoModelForCausalLM.from_pretrained({str(folder)!r}, dtype="auto", device_map="auto")\n'
        'ids = tok(f"<|im_start|>user\\n{q}<|im_end|>\\n", return_tensors="pt").to("cuda")\n'
        "out = model.generate(**ids, max_new_tokens=8)\n"
    )
    (folder / "tokenizer_config.json").write_text('{"model_max_length": 2048}')
    assert [f.rule for f in _check(tmp_path, code).findings if f.rule in ("IT003", "IT013")] == []
    from infertune.doctor.checkpoint import chat_template

    chat_template.cache_clear()
    (folder / "tokenizer_config.json").write_text('{"chat_template": "{% for m in messages %}{% endfor %}"}')
    assert [f.rule for f in _check(tmp_path, code).findings if f.rule in ("IT003", "IT013")] == ["IT003"]
    chat_template.cache_clear()


def test_double_bos_reads_the_template_of_a_checkpoint_here(tmp_path):
    from infertune.doctor.checkpoint import chat_template

    folder = tmp_path / "ckpt"
    folder.mkdir()
    code = (
        f"tok = AutoTokenizer.from_pretrained({str(folder)!r})\n"
        'text = tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)\n'
        'ids = tok(text, return_tensors="pt")\n'
    )
    for template, want in (
        ("{{ bos_token }}{% for m in messages %}{% endfor %}", ["IT025"]),
        ("{% for m in messages %}{% endfor %}", []),
    ):
        chat_template.cache_clear()
        (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
        assert [f.rule for f in _check(tmp_path, code).findings if f.rule == "IT025"] == want
    chat_template.cache_clear()
