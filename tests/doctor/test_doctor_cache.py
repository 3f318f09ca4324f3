"""The doctor's findings cache: an unchanged file is answered from its last check without loading a rule, and
anything the check read (the file, its version pins, a checkpoint's files, the options) moving is a miss."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAD = "import torch\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
LOADS = (
    'n = AutoModelForCausalLM.from_pretrained("m2", torch_dtype=torch.float16, device_map="auto")\n'
    'o = AutoModelForCausalLM.from_pretrained("m3", dtype=torch.float16, device_map="auto")\n'
)
# what the rules loaded: printed by the child after the doctor answered
PROBE = (
    "import sys; from infertune.doctor.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print('RULES-LOADED' if 'infertune.doctor.rules' in sys.modules else 'RULES-NOT-LOADED', file=sys.stderr)\n"
    "sys.exit(code)\n"
)


@pytest.fixture()
def env(tmp_path, monkeypatch):
    monkeypatch.delenv("INFERTUNE_NO_DOCTOR_CACHE", raising=False)
    monkeypatch.setenv("INFERTUNE_HOME", str(tmp_path / "home"))
    return {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}


def doctor(env, *args, cwd):
    r = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )
    loaded = "RULES-LOADED" in r.stderr
    return r.returncode, r.stdout, r.stderr.replace("RULES-LOADED\n", "").replace("RULES-NOT-LOADED\n", ""), loaded


def test_an_unchanged_file_is_answered_from_the_cache_and_an_edit_is_not(tmp_path, env):
    script = tmp_path / "app.py"
    script.write_text(HEAD + 'm = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf")\n')
    first = doctor(env, "app.py", cwd=tmp_path)
    assert first[0] == 1 and first[3] is True and "IT001" in first[1]
    again = doctor(env, "app.py", cwd=tmp_path)
    assert again[:3] == first[:3] and again[3] is False  # same answer, exit code and summary; no rule loaded
    as_json = doctor(env, "app.py", "--format", "json", cwd=tmp_path)  # the same findings, printed as JSON
    assert as_json[3] is False and doctor(env, "app.py", "--format=json", "--no-cache", cwd=tmp_path)[:3] == as_json[:3]
    assert json.loads(as_json[1])["findings"][0]["rule"] == "IT001"
    uncached = doctor(env, "app.py", "--no-cache", cwd=tmp_path)
    assert uncached[:3] == first[:3] and uncached[3] is True
    script.write_text(HEAD + 'm = AutoModelForCausalLM.from_pretrained("gpt2", device_map="cpu")\n')
    edited = doctor(env, "app.py", cwd=tmp_path)
    assert edited[3] is True and "IT001" not in edited[1]


def test_options_are_part_of_the_key(tmp_path, env):
    (tmp_path / "app.py").write_text(HEAD + 'm = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf")\n')
    everything = doctor(env, "app.py", cwd=tmp_path)
    silenced = doctor(env, "app.py", "--ignore", "IT001,IT002", cwd=tmp_path)
    assert silenced[3] is True and "IT001" not in silenced[1] and "IT001" in everything[1]
    assert doctor(env, "app.py", "--ignore", "IT001,IT002", cwd=tmp_path)[:3] == silenced[:3]
    assert doctor(env, "app.py", cwd=tmp_path)[:3] == everything[:3]


def test_a_pin_added_beside_the_script_is_a_miss(tmp_path, env):
    app = tmp_path / "svc"
    app.mkdir()
    (app / "main.py").write_text(HEAD + LOADS)
    (tmp_path / ".git").mkdir()  # the project's root: pins above it are not read
    unpinned = doctor(env, "svc/main.py", cwd=tmp_path)
    (app / "requirements.txt").write_text("transformers==4.46.3\n")
    v4 = doctor(env, "svc/main.py", cwd=tmp_path)
    assert v4[3] is True and v4[1] != unpinned[1] and "requirements.txt" in v4[1]
    assert doctor(env, "svc/main.py", cwd=tmp_path)[3] is False
    (app / "requirements.txt").write_text("transformers>=5.1\n")  # edited in place: its stamp moves
    v5 = doctor(env, "svc/main.py", cwd=tmp_path)
    assert v5[3] is True and v5[0] == 0 and v5[1] == ""


def test_a_checkpoint_arriving_here_is_a_miss(tmp_path, env):
    folder = tmp_path / "mesh-chat"
    code = (
        "tok = AutoTokenizer.from_pretrained('mesh-chat')\n"
        "model = AutoModelForCausalLM.from_pretrained('mesh-chat', dtype='auto', device_map='auto')\n"
        'ids = tok(f"<|im_start|>user\\n{q}<|im_end|>\\n", return_tensors="pt").to("cuda")\n'
        "out = model.generate(**ids, max_new_tokens=8)\n"
    )
    (tmp_path / "app.py").write_text(HEAD + code)
    assert "IT003" in doctor(env, "app.py", cwd=tmp_path)[1]  # not here: a chat model's prompt built by hand
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text('{"model_max_length": 2048}')  # here, with no chat template
    here = doctor(env, "app.py", cwd=tmp_path)
    assert here[3] is True and "IT003" not in here[1]
    assert doctor(env, "app.py", cwd=tmp_path)[3] is False
    (folder / "tokenizer_config.json").write_text('{"chat_template": "{% for m in messages %}{% endfor %}"}')
    templated = doctor(env, "app.py", cwd=tmp_path)
    assert templated[3] is True and "IT003" in templated[1]


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("a.py", b"def broken(:\n", "a.py:1:12: syntax error"),
        ("a.py", b"for x in y:\n    pass\nbreak\n", "a.py:3:1: syntax error: 'break' outside loop"),
        ("a.py", b"\xff\xfe\x00", "a.py: not a UTF-8 text file"),
        ("a.py", None, "a.py: no such file or directory"),
        ("a", "dir", "a: no Python files to check"),
    ],
)
def test_bad_input_is_one_line_exit_2_with_the_cache_on_and_never_cached(tmp_path, env, name, content, says):
    if content == "dir":
        (tmp_path / name).mkdir()
    elif content is not None:
        (tmp_path / name).write_bytes(content)
    for _ in range(2):
        code, out, err, _ = doctor(env, name, cwd=tmp_path)
        assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith(f"error: {says}"), err
    assert not (tmp_path / "home" / "doctor").exists()


def test_a_folder_is_answered_whole_from_the_cache(tmp_path, env):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text(HEAD + 'm = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf")\n')
    (pkg / "sub" / "b.py").write_text("x = 1\n")
    first = doctor(env, "pkg/", cwd=tmp_path)
    assert "pkg/a.py:" in first[1] and "2 files" in first[2]
    assert doctor(env, "./pkg", cwd=tmp_path)[:3] == first[:3]  # the same files, named alike
    again = doctor(env, "pkg", cwd=tmp_path)
    assert again[:3] == first[:3] and again[3] is False
    (pkg / "sub" / "c.py").write_text("y = 2\n")  # a new file: checked, and counted
    grown = doctor(env, "pkg", cwd=tmp_path)
    assert grown[3] is True and "3 files" in grown[2]


def test_a_damaged_entry_or_a_file_given_twice_is_checked_again(tmp_path, env):
    (tmp_path / "app.py").write_text(HEAD + 'm = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf")\n')
    first = doctor(env, "app.py", cwd=tmp_path)
    (entry,) = (tmp_path / "home" / "doctor").iterdir()
    entry.write_bytes(b"\x00not a cache entry")
    damaged = doctor(env, "app.py", cwd=tmp_path)
    assert damaged[:3] == first[:3] and damaged[3] is True
    assert doctor(env, "app.py", cwd=tmp_path)[3] is False  # rewritten whole
    twice = doctor(env, "app.py", "app.py", cwd=tmp_path)
    assert twice[3] is True and twice[1].count("IT001") == 2 * first[1].count("IT001") and "2 files" in twice[2]
    assert doctor(env, "app.py", "app.py", cwd=tmp_path)[:3] == twice[:3]
