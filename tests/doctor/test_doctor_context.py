"""infertune doctor, the context its rules read before they speak (written from doctor-real-6 and doctor-real-7's
development parts): how often a pass runs, what a checkpoint is, what a folder or helper holds. Each test runs the
real rules on a snippet, the silent shape beside the one that must still fire."""

from tests.doctor.cases import check_code


def rules(tmp_path, code: str) -> list[str]:
    return [f.rule for f in check_code(tmp_path, code).findings]


def test_a_single_forward_pass_at_module_level_keeps_autograd_quietly(tmp_path):
    """IT030: one pass at module level (a snippet, a Streamlit page) frees its graph with its output; a pass in a
    loop or a request handler repeats, and is reported."""
    load = 'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto")\nenc = tok(texts, return_tensors="pt")\n'
    assert rules(tmp_path, load + "logits = model(**enc).logits\n") == []
    assert rules(tmp_path, load + "if enc:\n    logits = model(**enc).logits\n") == []
    assert rules(tmp_path, load + "for b in batches:\n    logits = model(**b).logits\n") == ["IT030"]
    assert rules(tmp_path, load + "def embed(b):\n    return model(**b).logits\n") == ["IT030"]


def test_gpt2_classes_load_fp32_checkpoints(tmp_path):
    """IT001: GPT2LMHeadModel loads a GPT-2 (or a fine-tune of one), saved in fp32: no dtype is no waste."""
    code = 'from transformers import {cls}\nmodel = {cls}.from_pretrained("org/ft").to("cuda")\n' + (
        "out = model.generate(**inputs, max_new_tokens=32)\n"
    )
    assert rules(tmp_path, code.format(cls="GPT2LMHeadModel")) == []
    assert rules(tmp_path, code.format(cls="AutoModelForCausalLM")) == ["IT001"]


def test_max_length_with_a_list_of_short_literal_prompts_is_a_budget_left_whole(tmp_path):
    """IT014: max_length=100 over three one-to-three-word prompts leaves about 97 new tokens; a prompt from the
    user does not."""
    head = 'model = AutoModelForCausalLM.from_pretrained("org/m", dtype="auto", device_map="auto")\n'
    gen = 'enc = tok({}, return_tensors="pt", padding=True)\nout = model.generate(**enc, max_length=100)\n'
    assert "IT014" not in rules(tmp_path, head + gen.format('["Hello", "Another try", "A third test"]'))
    assert "IT014" in rules(tmp_path, head + "q = input()\n" + gen.format("q"))


def test_a_bare_folder_name_is_an_unknown_model_but_a_named_family_is_not(tmp_path):
    """IT004: from_pretrained('finetuned') is a folder beside the script whose contents the file does not tell;
    'internlm-model' says what it holds, and 'org/m' is a Hub id."""
    code = (
        'model = AutoModelForCausalLM.from_pretrained("{m}", dtype="auto", device_map="auto")\n'
        "q = input()\nenc = tok(q, return_tensors='pt').to(model.device)\n"
        "out = model.generate(**enc, max_new_tokens=32)\n"
        "reply = tok.decode(out[0], skip_special_tokens=True)\n"
    )
    assert rules(tmp_path, code.format(m="finetuned")) == []
    assert "IT004" in rules(tmp_path, code.format(m="internlm-model"))  # (and IT035: InternLM ships its own code)
    assert rules(tmp_path, code.format(m="org/m")) == ["IT004"]


def test_a_helper_the_probe_calls_with_its_own_sentence_is_the_probe(tmp_path):
    """IT004: a module loop printing what a helper generates from a fixed sentence start shows prompt and
    continuation on purpose; a helper handed its sentence by the caller is text in, text out."""
    head = 'model = AutoModelForCausalLM.from_pretrained("bigscience/bloom-3b", dtype="auto", device_map="auto")\n'
    own = (
        'text = "Hello my name is"\n\ndef run():\n    enc = tok(text, return_tensors="pt").to(model.device)\n'
        "    out = model.generate(**enc, max_new_tokens=20)\n    return tok.decode(out[0], skip_special_tokens=True)\n"
        "\nfor i in range(3):\n    print(run())\n"
    )
    handed = (
        'def run(text):\n    enc = tok(text, return_tensors="pt").to(model.device)\n'
        "    out = model.generate(**enc, max_new_tokens=20)\n    return tok.decode(out[0], skip_special_tokens=True)\n"
        '\nprint(run("Hello my name is"))\n'
    )
    assert rules(tmp_path, head + own) == []
    assert rules(tmp_path, head + handed) == ["IT004"]


def test_t5_with_no_length_stops_at_twenty_tokens_in_a_route(tmp_path):
    """IT036: T5 and Flan-T5 set no length of their own; a text2text-generation pipeline or generate on a caller's
    text with none stops at 20 tokens. Fixed sentences at module level, or a length given, are fine."""
    pipe = 'from transformers import pipeline\npipe = pipeline("text2text-generation", model="google/flan-t5-small")\n'
    assert rules(tmp_path, pipe + "def answer(q):\n    return pipe(q)[0]['generated_text']\n") == ["IT036"]
    assert rules(tmp_path, pipe + "def answer(q):\n    return pipe(q, max_new_tokens=128)\n") == []
    assert rules(tmp_path, pipe + 'print(pipe("translate English to German: I like tea."))\n') == []
    opus = pipe.replace("text2text-generation", "translation").replace("google/flan-t5-small", "t5-small")
    assert rules(tmp_path, opus + "def answer(q):\n    return pipe(q)\n") == []  # (its task_specific_params)


def test_phi_checkpoints_are_native(tmp_path):
    """IT012: Phi-1.5 and Phi-2 are native since transformers 4.37; trust_remote_code on them runs code for
    nothing. InternLM still ships its own."""
    code = (
        'model = AutoModelForCausalLM.from_pretrained("{m}", dtype="auto", device_map="cuda", trust_remote_code=True)'
    )

    assert rules(tmp_path, code.format(m="microsoft/phi-2")) == ["IT012"]
    assert rules(tmp_path, code.format(m="microsoft/phi-1_5")) == ["IT012"]
    assert rules(tmp_path, code.format(m="internlm/internlm2-chat-7b")) == []


def test_weights_loaded_twice_only_when_the_first_copy_is_dead(tmp_path):
    """IT039: the same checkpoint loaded again while the first copy is never used after it (rebound, or left
    unused beside a pipeline built from its id); silent for two live copies, a `del` between, one of two branches,
    two revisions, and a pipeline handed the loaded model."""
    load = 'model = AutoModelForCausalLM.from_pretrained("org/m", dtype="auto", device_map="auto")\n'
    pipe = 'from transformers import pipeline\npipe = pipeline("text-generation", model={})\n'
    assert rules(tmp_path, load + load) == ["IT039"]
    assert rules(tmp_path, load + pipe.format('"org/m"') + "print(pipe.model.device)\n") == ["IT039"]
    assert rules(tmp_path, load + pipe.format("model") + "print(pipe.model.device)\n") == []
    assert rules(tmp_path, load + pipe.format('"org/m"') + "print(pipe.model.device, model.device)\n") == []
    assert rules(tmp_path, load + "del model\n" + load) == []
    branches = "if fast:\n    " + load + "else:\n    " + load
    assert rules(tmp_path, branches) == []
    assert rules(tmp_path, load + load.replace('"org/m"', '"org/m", revision="v2"')) == []
