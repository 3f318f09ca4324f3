"""benchmarks/doctor_real.py judges the doctor against hand labels: a finding is right only next to a labelled problem
of its rule, a problem takes one finding, and every other finding (a repeat included) is a false positive."""

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).parents[2] / "benchmarks" / "doctor_real.py"


def bench():
    spec = importlib.util.spec_from_file_location("doctor_real", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_judge_counts_a_repeat_as_wrong_and_a_far_finding_as_wrong():
    case = {"problems": [{"line": 10, "kind": "IT001", "what": "fp32"}], "silent": [{"line": 40, "kind": "IT010"}]}
    j = bench().judge(case, [(11, "IT001", "m"), (12, "IT001", "again"), (40, "IT010", "m"), (30, "IT001", "far")])
    assert j["right"] == [(11, "IT001")]
    assert sorted((line, rule, silent) for line, rule, _, silent in j["wrong"]) == [
        (12, "IT001", False),
        (30, "IT001", False),
        (40, "IT010", True),
    ]
    assert [p["found"] for p in j["problems"]] == [True]


def test_report_runs_the_real_doctor_on_a_labelled_script(tmp_path, capsys):
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "z01.py"
    script.write_text(
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        'tok = AutoTokenizer.from_pretrained("x")\n'
        'm = AutoModelForCausalLM.from_pretrained("x", dtype="auto", device_map="auto")\n'
        'enc = tok(open("doc.txt").read(), return_tensors="pt").to(m.device)\n'
        "out = m.generate(**enc, max_length=256)\n"
        "print(tok.decode(out[0][enc.input_ids.shape[1]:], skip_special_tokens=True))\n"
    )
    labels = [
        {
            "id": "z01",
            "repo": "o/r",
            "path": "a.py",
            "commit": "0" * 40,
            "problems": [
                {"line": 5, "kind": "IT014", "what": "max_length counts the prompt"},
                {"line": 2, "kind": "other:made-up", "what": "a problem no rule covers"},
            ],
            "silent": [],
        },
        {"id": "z02", "repo": "o/s", "path": "b.py", "commit": "0" * 40, "problems": [], "silent": []},
    ]
    (tmp_path / "labels-z-dev.json").write_text(json.dumps(labels))
    b = bench()
    out = b.report("dev", b.load(tmp_path, "dev"), tmp_path, None, verbose=False)
    assert out["scripts"] == 1 and out["precision"] == 1.0 and out["recall"] == 0.5
    assert "missing script: z02" in capsys.readouterr().out


def test_a_finding_inside_the_labelled_statement_matches_it():
    source = "x = 1\nout = pipe(\n    text,\n    a=1,\n    b=2,\n    max_length=100,\n)\ny = 2\n"
    b = bench()
    ends = b.statement_ends(source)
    assert ends[2] == 7
    case = {"problems": [{"line": 2, "kind": "IT014", "what": "max_length"}], "silent": []}
    assert b.judge(case, [(6, "IT014", "m")], ends)["right"] == [(6, "IT014")]
    assert b.judge(case, [(6, "IT014", "m")])["right"] == []  # 4 lines away, without the statement's span
    assert b.judge(case, [(8, "IT014", "m")], ends)["right"] == []  # after the statement


def test_a_file_python_cannot_parse_counts_as_found_at_the_line_the_doctor_names(tmp_path):
    """The doctor refuses a file with a syntax error and names its line: that is the labelled problem, told to the
    user, so it is scored as an `other:syntax-error` finding there; a file that parses has no such finding."""
    b = bench()
    broken = tmp_path / "broken.py"
    broken.write_text("from transformers import pipeline\n\npipe = pipeline('text-generation'))\n")
    found, error = b.findings(broken, None)
    assert error is None and [(line, rule) for line, rule, _ in found] == [(3, "other:syntax-error")]
    fine = tmp_path / "fine.py"
    fine.write_text("from transformers import pipeline\n\npipe = pipeline('text-generation')\n")
    assert all(rule != "other:syntax-error" for _, rule, _ in b.findings(fine, None)[0])


def test_a_handler_finding_matches_a_label_at_its_functions_def_line():
    """IT022 names the async handler it is in: labelled at that handler's `def` (or its decorator), the finding at
    the generate call inside matches; another rule's finding there, or one outside the function, does not."""
    source = (
        "app = 1\n\n@app.post('/x')\nasync def handler(req):\n    a = 1\n    b = 2\n    c = 3\n"
        "    out = model.generate(req)\n    return out\n\nz = 1\n"
    )
    b = bench()
    ends, bodies = b.statement_ends(source), b.function_bodies(source)
    assert bodies[3] == bodies[4] == 9
    for labelled in (3, 4):
        case = {"problems": [{"line": labelled, "kind": "IT022", "what": "blocks the loop"}], "silent": []}
        assert b.judge(case, [(8, "IT022", "m")], ends, bodies)["right"] == [(8, "IT022")]
        assert b.judge(case, [(8, "IT022", "m")], ends)["right"] == []  # without the bodies: 4+ lines away
        assert b.judge(case, [(11, "IT022", "m")], ends, bodies)["right"] == []  # after the function
    other = {"problems": [{"line": 4, "kind": "IT004", "what": "prompt echoed"}], "silent": []}
    assert b.judge(other, [(8, "IT004", "m")], ends, bodies)["right"] == []
