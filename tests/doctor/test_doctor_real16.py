"""infertune doctor, what doctor-real-16's development part taught (its cases are named in docs/doctor.md). Each
test runs the real rules on a snippet, the silent shape beside the one that must fire."""

from tests.doctor.cases import check_code, rules


def test_a_local_copy_of_qwen_1_casts_itself_like_the_hub_one(tmp_path):
    """IT001: Qwen (v1)'s own modelling code picks bf16/fp16 when no dtype is given, for a local folder named after
    the checkpoint too; another checkpoint's local copy is still loaded in fp32 on 4.x."""
    code = (
        'model = AutoModelForCausalLM.from_pretrained("/home/me/qwen/{}", device_map="auto", trust_remote_code=True)\n'
        'out = model.generate(**tok("hi", return_tensors="pt").to(model.device), max_new_tokens=32)\n'
    )
    assert "IT001" not in rules(tmp_path, code.format("Qwen-7B-Chat"))
    assert "IT001" in rules(tmp_path, code.format("Llama-2-7b-chat-hf"))


def test_options_of_a_parser_built_elsewhere_are_not_known_here(tmp_path):
    """IT038: `args.x` is an AttributeError only where the file builds the parser (here, or in a helper of the
    file); a parser from an imported builder has options this file cannot see."""
    code = "import argparse\n{}args = parser.parse_args()\nprint(args.data_type)\n"

    def rules(tmp_path, code: str) -> list[str]:  # (IT038 is on: the snippet defines every name it reads)
        return [f.rule for f in check_code(tmp_path, code, names=True).findings]

    here = 'parser = argparse.ArgumentParser()\nparser.add_argument("--model")\n'
    assert rules(tmp_path, code.format(here)) == ["IT038"]
    helper = "def get_parser():\n    p = argparse.ArgumentParser()\n    p.add_argument('--model')\n    return p\n"
    assert rules(tmp_path, code.format(helper + "parser = get_parser()\n")) == ["IT038"]
    assert rules(tmp_path, code.format("from evaluate_bias import build_params\nparser = build_params()\n")) == []
