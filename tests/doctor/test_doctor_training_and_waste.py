"""infertune doctor: training steps left in inference (IT040, IT041), answers thrown away (IT042), misspelled options
(IT043), and where a pipeline given no device runs (transformers 4.47 moved it to the GPU). Each test runs the real
rules on a snippet, the silent shape beside the one that must fire."""

from infertune.doctor.nodes import Target
from tests.doctor.cases import LOAD, check_code


def rules(tmp_path, code: str, target: Target | None = None) -> list[str]:
    return sorted(f.rule for f in check_code(tmp_path, code, target=target).findings)


def pinned(version: tuple[int, ...]) -> Target:
    return Target(transformers_min=version, transformers_max=version, version_source="requirements.txt")


def test_kbit_training_prep_is_reported_only_where_nothing_trains(tmp_path):
    prep = (
        "from peft import prepare_model_for_kbit_training\n" + LOAD + "model = prepare_model_for_kbit_training(model)\n"
    )
    gen = "out = model.generate(**inputs, max_new_tokens=32)\nprint(out)\n"
    assert rules(tmp_path, prep + gen) == ["IT040"]
    assert rules(tmp_path, prep + "for p in model.parameters():\n    if p.requires_grad:\n        print(p)\n" + gen)
    for trains in (
        "loss.backward()\n",
        "opt = torch.optim.AdamW(model.parameters())\n",
        "model = get_peft_model(model, cfg)\n",
    ):
        assert "IT040" not in rules(tmp_path, prep + trains + gen), trains


def test_a_head_on_a_bare_encoder_is_random_unless_the_file_trains_or_restores_it(tmp_path):
    load = "from transformers import {cls}\nclf = {cls}.from_pretrained('{id}', num_labels=3)\n"
    bare = load.format(cls="AutoModelForSequenceClassification", id="bert-base-uncased")
    assert rules(tmp_path, bare) == ["IT041"]
    assert rules(tmp_path, load.format(cls="AutoModelForTokenClassification", id="prajjwal1/bert-tiny")) == ["IT041"]
    assert rules(tmp_path, load.format(cls="AutoModelForSequenceClassification", id="org/bert-base-uncased-imdb")) == []
    assert rules(tmp_path, load.format(cls="AutoModel", id="bert-base-uncased")) == []  # no head: embeddings
    assert rules(tmp_path, bare + "clf.load_state_dict(torch.load('head.pt'))\n") == []
    assert rules(tmp_path, bare + "trainer = Trainer(model=clf)\ntrainer.train()\n") == []
    pipe = "from transformers import pipeline\nnlp = pipeline('{task}', model='{id}')\n"
    assert rules(tmp_path, pipe.format(task="sentiment-analysis", id="distilbert-base-uncased")) == ["IT041"]
    assert rules(tmp_path, pipe.format(task="fill-mask", id="distilbert-base-uncased")) == []


def test_an_answer_thrown_away_in_a_function_or_a_loop(tmp_path):
    gen = "model.generate(**inputs, max_new_tokens=32)"
    assert rules(tmp_path, LOAD + f"def answer(inputs):\n    out = {gen}\n") == ["IT042"]
    assert rules(tmp_path, LOAD + f"def answer(inputs):\n    out = {gen}\n    return out\n") == []
    assert rules(tmp_path, LOAD + f"for inputs in batches:\n    {gen}\n") == ["IT042"]
    assert rules(tmp_path, LOAD + f"for inputs in batches:\n    out = {gen}\nout = {gen}\nprint(out)\n") == ["IT042"]
    # read after the loop (its last pass), on the next pass, or in a branch that may not have stored again
    assert rules(tmp_path, LOAD + f"for inputs in batches:\n    out = {gen}\nprint(out)\n") == []
    assert rules(tmp_path, LOAD + f"outs = []\nfor inputs in batches:\n    outs.append(last)\n    last = {gen}\n") == []
    branch = f"def answer(inputs, a):\n    out = {gen}\n    if a:\n        out = None\n    return out\n"
    assert rules(tmp_path, LOAD + branch) == []
    assert rules(tmp_path, LOAD + f"out = {gen}\n") == []  # a script's last answer at module level: not labelled so
    warm = f"import time\nfor _ in range(3):\n    t0 = time.perf_counter()\n    out = {gen}\n    print(time.perf_counter() - t0)\n"
    assert rules(tmp_path, LOAD + warm) == []
    streamed = "def answer(inputs):\n    model.generate(**inputs, streamer=streamer, max_new_tokens=32)\n"
    assert rules(tmp_path, LOAD + streamed) == []


def test_misspelled_options_are_named_with_their_spelling(tmp_path):
    found = check_code(tmp_path, LOAD + "out = model.generate(**inputs, max_new_token=32, generator_config=cfg)\n")
    spelled = [f for f in found.findings if f.rule == "IT043"]  # (and IT036: no length reaches generate)
    assert "`max_new_tokens`" in spelled[0].message and "`generation_config`" in spelled[1].message
    load = 'model = AutoModelForCausalLM.from_pretrained("m", device_map="auto", {})\n'
    assert "IT043" in rules(tmp_path, load.format("torch_type=torch.bfloat16"))  # (and IT001: no dtype at all)
    for fine in ("dtype='auto'", "_attn_implementation='sdpa'", "use_flash_attention_2=True", "rope_theta=1e6"):
        assert "IT043" not in rules(tmp_path, load.format(fine)), fine
    assert rules(tmp_path, LOAD + "out = model.generate(**inputs, max_new_tokens=32, pixel_values=px)\n") == []


def test_a_pipeline_with_no_device_runs_on_the_gpu_since_4_47(tmp_path):
    """transformers 4.47 gives a pipeline with no device cuda:0 when there is one, moving a model handed
    to it: a model left on the CPU is reported only where the pins allow an older release."""
    code = (
        'model = AutoModelForCausalLM.from_pretrained("org/m-7b", torch_dtype=torch.bfloat16)\n'
        'from transformers import pipeline\npipe = pipeline("text-generation", model=model, tokenizer=tok)\n'
        "print(pipe(q, max_new_tokens=32, return_full_text=False))\n"
    )
    assert rules(tmp_path, code) == []
    assert rules(tmp_path, code, target=pinned((4, 36, 2))) == ["IT002"]
    assert rules(tmp_path, code, target=pinned((4, 44, 0))) == ["IT002"]
    assert rules(tmp_path, code, target=pinned((4, 48, 0))) == []


def test_a_large_decoder_pipeline_with_no_dtype_loads_fp32_on_4x(tmp_path):
    """On a GPU (device=0) with no dtype: IT001. With neither device nor dtype: one IT002 that names both outcomes
    (the CPU before 4.47, fp32 on cuda:0 after); with a dtype and no device, only a pin before 4.47 speaks."""
    code = 'from transformers import pipeline\npipe = pipeline("text-generation", model="org/m-7b"{})\n'
    assert rules(tmp_path, code.format(", device=0")) == ["IT001"]
    assert rules(tmp_path, code.format(", device=0, dtype=torch.bfloat16")) == []
    both = check_code(tmp_path, code.format("")).findings
    assert [f.rule for f in both] == ["IT002"] and "4.47" in both[0].message and "fp32" in both[0].message
    assert rules(tmp_path, code.format(", dtype=torch.bfloat16")) == []
    assert rules(tmp_path, code.format(", dtype=torch.bfloat16"), target=pinned((4, 40, 0))) == ["IT002"]
    assert rules(tmp_path, code.format(", device='cpu'")) == []
    assert rules(tmp_path, code.format(", device=0"), target=pinned((5, 1, 0))) == []  # 5.x: the checkpoint's dtype
    assert rules(tmp_path, code.replace("m-7b", "m-7b-GPTQ").format(", device=0")) == []
    assert rules(tmp_path, code.replace("m-7b", "m-350m").format(", device=0")) == []
