"""infertune doctor, what doctor-real-15's development part taught (its cases are named in docs/doctor.md). Each
test runs the real rules on a snippet, the silent shape beside the one that must fire."""

from infertune.doctor.nodes import Target
from tests.doctor.cases import check_code, rules


def test_a_pipeline_before_4_43_adds_no_bos_to_templated_text(tmp_path):
    """IT025 for a text-generation pipeline given chat-template text: since transformers 4.43 it tokenizes with
    special tokens (a second BOS); before, without (doctor-real-15 d07, pinned to 4.38)."""
    code = (
        'from transformers import pipeline\npipe = pipeline("text-generation", model="google/gemma-7b-it", '
        'device_map="auto", dtype="auto")\n'
        'text = pipe.tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False, '
        "add_generation_prompt=True)\n"
        "print(pipe(text, max_new_tokens=64, return_full_text=False)[0]['generated_text'])\n"
    )
    old = Target(transformers_max=(4, 38, 99), version_source="requirements.txt")
    assert "IT025" in rules(tmp_path, code)
    assert "IT025" not in rules(tmp_path, code, target=old)


def test_chatglm_prompts_in_its_own_round_format_are_its_template(tmp_path):
    """IT013/IT003: ChatGLM2 ships no chat template; its documented format is "[Round 1]\\n\\n问：...\\n\\n答：", which a
    helper of the file writes (here for each item of a list comprehension): neither raw text nor a hand-built
    stand-in for a template. The bare questions are raw text."""
    code = (
        "from transformers import AutoModel\n"
        'tok = AutoTokenizer.from_pretrained("THUDM/chatglm2-6b", trust_remote_code=True)\n'
        'model = AutoModel.from_pretrained("THUDM/chatglm2-6b", trust_remote_code=True).bfloat16().cuda()\n'
        'def build_prompt(text):\n    return "[Round {{}}]\\n\\n问：{{}}\\n\\n答：".format(1, text)\n'
        "def answer(texts):\n"
        '    inputs = tok([{}], padding=True, return_tensors="pt").to("cuda")\n'
        "    out = model.generate(**inputs, do_sample=False, max_new_tokens=64)\n"
        '    return [tok.decode(o[inputs["input_ids"].shape[1]:]) for o in out]\n'
    )
    assert rules(tmp_path, code.format("build_prompt(t) for t in texts")) == []
    assert rules(tmp_path, code.format("t for t in texts")) == ["IT013"]


def test_raw_text_to_a_chat_model_is_one_finding_per_scope(tmp_path):
    """IT013: a script's first question and its chat loop feed the same chat model raw text: one missing template,
    one finding that names both lines; a function of its own (a route) is a finding of its own."""
    code = (
        'model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B-Instruct", dtype="auto", device_map="auto")\n'
        'ids = tok("2+3?", return_tensors="pt").to(model.device)\n'
        "print(tok.decode(model.generate(**ids, max_new_tokens=64)[0][ids['input_ids'].shape[1]:]))\n"
        "while True:\n"
        '    ids = tok(input("> "), return_tensors="pt").to(model.device)\n'
        "    print(tok.decode(model.generate(**ids, max_new_tokens=64)[0][ids['input_ids'].shape[1]:]))\n"
    )
    found = [f for f in check_code(tmp_path, code).findings if f.rule == "IT013"]
    assert len(found) == 1 and "also at line" in found[0].message
    route = "def answer(q):\n    ids = tok(q, return_tensors='pt').to(model.device)\n    return model.generate(**ids, max_new_tokens=64)\n"
    assert rules(tmp_path, code + route).count("IT013") == 2


def test_sampling_values_in_a_generation_config_with_an_unfilled_kwargs(tmp_path):
    """IT015: GenerationConfig(temperature=..., num_beams=4, **kwargs) inside a callback whose **kwargs nothing in
    the file fills (alpaca-lora's evaluate, a Gradio fn): beam search ignores the sampling values. A call site that
    passes another keyword may carry do_sample, so then it is silent."""
    code = (
        'model = AutoModelForCausalLM.from_pretrained("huggyllama/llama-7b", dtype="auto", device_map="auto")\n'
        "def evaluate(instruction, temperature=0.1, top_p=0.75, num_beams=4, **kwargs):\n"
        '    ids = tok(instruction, return_tensors="pt").input_ids.to(model.device)\n'
        "    cfg = GenerationConfig(temperature=temperature, top_p=top_p, num_beams=num_beams, **kwargs)\n"
        "    out = model.generate(input_ids=ids, generation_config=cfg, max_new_tokens=128)\n"
        "    return tok.decode(out[0][ids.shape[1]:])\n"
        "gr.Interface(fn=evaluate, inputs=['text'], outputs='text').launch()\n"
    )
    assert "IT015" in rules(tmp_path, code)
    assert "IT015" not in rules(tmp_path, code + "evaluate('hi', do_sample=True)\n")


def test_a_revision_glued_to_the_model_id_is_no_hub_id(tmp_path):
    """IT046: "org/name@<hash>" is not parsed by from_pretrained; the revision goes to revision=."""
    code = 'model = AutoModel.from_pretrained("{}", trust_remote_code=True)\n'
    assert rules(tmp_path, code.format("jinaai/jina-embeddings-v3@f1944de8")) == ["IT046"]
    assert rules(tmp_path, code.format("jinaai/jina-embeddings-v3")) == []
