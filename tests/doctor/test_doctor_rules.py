"""infertune doctor, rule by rule: each fires on the mistake and stays silent on the correct version of the same code
(tests/doctor/cases.py), and the rules that read what the file or a local checkpoint says."""

import json
from pathlib import Path

import pytest

from infertune.doctor.nodes import Target
from infertune.doctor.rules import RULES
from tests.doctor.cases import CASES, GEN, LOAD, check_code


def test_every_rule_has_a_case_and_a_doc_section():
    assert set(CASES) == {r.id for r in RULES}
    docs = (Path(__file__).parents[2] / "docs" / "doctor.md").read_text()
    for r in RULES:
        assert f"## {r.id} {r.name}" in docs


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_fires_on_the_mistake_and_not_on_the_fix(tmp_path, rule):
    bad, good = CASES[rule]
    names = rule == "IT038"
    found = check_code(tmp_path, bad, names=names).findings
    assert [f.rule for f in found] == [rule], [f.model_dump() for f in found]
    f = found[0]
    assert f.line > 2 and f.col >= 1 and f.fix and f.path.endswith("s.py")
    assert check_code(tmp_path, good, names=names).findings == []


def _v(version: str) -> Target:
    v = tuple(int(x) for x in version.split("."))
    return Target(transformers_min=v, transformers_max=v, version_source="--target-version")


def test_target_facts_sharpen_rules(tmp_path):
    code = (
        'm = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16, device_map="auto", '
        'attn_implementation="flash_attention_2", max_memory={0: "20GiB"})'
    )
    assert check_code(tmp_path, code).findings == []  # 20 GiB is no card's size; FA2 in bf16
    t4 = Target(gpu_name="T4", gpu_memory_bytes=16 * 10**9, compute_capability=7.5)
    msgs = {f.rule: f.message for f in check_code(tmp_path, code, target=t4).findings}
    assert set(msgs) == {"IT007", "IT009"} and "T4" in msgs["IT007"] and "7.5" in msgs["IT009"]
    # transformers 4.x defaults to fp32: no dtype + FlashAttention cannot load
    fa = 'm = AutoModelForCausalLM.from_pretrained("m", device_map="auto", attn_implementation="flash_attention_2")'
    assert {f.rule for f in check_code(tmp_path, fa, target=_v("4.46")).findings} == {"IT001", "IT009"}
    assert check_code(tmp_path, fa, target=_v("5.2")).findings == []  # 5.x loads the checkpoint's dtype


def test_chat_templates_token_names_and_patterns_are_not_prompts(tmp_path):
    code = (
        'TEMPLATE = "{% for m in messages %}<|im_start|>{{ m.role }}\\n{{ m.content }}<|im_end|>{% endfor %}"\n'
        'specials = ["<|endoftext|>", "<|im_start|>", "[INST]"]\n'
        'import re\nMARK = re.compile(r"<\\|im_start\\|>user")'
    )
    assert check_code(tmp_path, code).findings == []


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
    (f,) = check_code(tmp_path, code).findings
    assert f.rule == "IT010" and "temperature (model: 0.6)" in f.message and "top_k" not in f.message
    (folder / "generation_config.json").write_text('{"do_sample": false}')  # sets none: a deliberate choice
    assert check_code(tmp_path, code).findings == []


def test_default_length_reads_the_models_own_generation_config_when_it_is_here(tmp_path):
    """IT036: no length in the call; the checkpoint's generation_config.json decides whether 20 tokens is the cap."""
    folder, load = _local_checkpoint(tmp_path, '{"do_sample": false}')
    code = load + "out = model.generate(**inputs)"
    (f,) = check_code(tmp_path, code).findings
    assert f.rule == "IT036" and f.line == 4
    (folder / "generation_config.json").write_text('{"max_new_tokens": 512}')  # the checkpoint sets one
    assert check_code(tmp_path, code).findings == []


def test_published_checkpoint_facts_sampling_on_and_no_pad_token(tmp_path):
    """Facts of well-known checkpoints that are not here: Llama 2's generation_config.json samples and GPT-2's
    text-generation pipeline samples (task_specific_params), so a temperature without do_sample is used (IT015);
    GPT-2's tokenizer has no pad token, so padding even one prompt raises (IT037), which right padding (IT024) is
    not then reported on top of."""

    def rules(code: str) -> list[str]:  # (IT010, advisory and off by default, speaks of any explicit temperature)
        return [f.rule for f in check_code(tmp_path, code).findings if f.rule != "IT010"]

    temp = "out = model.generate(**inputs, max_new_tokens=64, temperature=0.7)"
    llama2 = (
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", dtype="auto", device_map="auto")\n'
    )
    assert rules(LOAD + temp) == ["IT015"]
    assert rules(llama2 + temp) == []
    pipe = "from transformers import pipeline\ng = pipeline('text-generation', model='{}')\ng(q, temperature=0.2, max_new_tokens=32)"
    assert rules(pipe.format("EleutherAI/gpt-neo-125m")) == ["IT015"]
    assert rules(pipe.format("gpt2")) == []
    gpt2 = (
        'tok = AutoTokenizer.from_pretrained("gpt2")\n'
        'model = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")\n'
        "def route(prompt: str):\n"
        '    enc = tok({}, padding=True, return_tensors="pt").to(model.device)\n'
        "    return model.generate(**enc, max_new_tokens=50)\n"
    )
    assert [(f.rule, f.line) for f in check_code(tmp_path, gpt2.format("prompt")).findings] == [("IT037", 6)]
    assert [f.rule for f in check_code(tmp_path, gpt2.format("[prompt, prompt]")).findings] == ["IT037"]
    fixed = gpt2.replace("def route", "tok.pad_token = tok.eos_token\ndef route")
    assert check_code(tmp_path, fixed.format("prompt")).findings == []  # one string: no batch to pad wrongly
    assert [f.rule for f in check_code(tmp_path, fixed.format("[prompt, prompt]")).findings] == ["IT024"]


def test_flash_attention_on_a_cpu_device_map(tmp_path):
    code = (
        'm = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16, device_map="cpu", '
        'attn_implementation="flash_attention_2")'
    )
    (f,) = check_code(tmp_path, code).findings
    assert f.rule == "IT009" and "cpu" in f.message


def test_keyword_findings_point_at_the_argument_and_a_comment_on_the_call_silences_them(tmp_path):
    code = LOAD + "out = model.generate(\n    **inputs,\n    max_length=64,\n)"
    (f,) = check_code(tmp_path, code).findings
    assert f.rule == "IT014" and f.line == 6  # the max_length line, as ruff points at the argument
    assert check_code(tmp_path, code.replace("generate(", "generate(  # infertune: ignore[IT014]")).findings == []


def test_trust_remote_code_only_on_transformers_loaders_of_native_checkpoints(tmp_path):
    def rules(code: str) -> list[str]:
        return [x.rule for x in check_code(tmp_path, code).findings if x.rule == "IT012"]

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
    assert "IT002" not in {x.rule for x in check_code(tmp_path, small).findings}
    big = 'model = AutoModelForCausalLM.from_pretrained("mistralai/Mixtral-8x7B-v0.1")\n' + GEN
    assert "IT002" in {x.rule for x in check_code(tmp_path, big).findings}
    meant_for_gpu = small + '\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
    assert "IT002" in {x.rule for x in check_code(tmp_path, meant_for_gpu).findings}


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
    assert [f.rule for f in check_code(tmp_path, code).findings if f.rule in ("IT003", "IT013")] == []
    from infertune.doctor.checkpoint import chat_template

    chat_template.cache_clear()
    (folder / "tokenizer_config.json").write_text('{"chat_template": "{% for m in messages %}{% endfor %}"}')
    assert [f.rule for f in check_code(tmp_path, code).findings if f.rule in ("IT003", "IT013")] == ["IT003"]
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
        assert [f.rule for f in check_code(tmp_path, code).findings if f.rule == "IT025"] == want
    chat_template.cache_clear()


def test_generate_per_request_is_a_serving_concern_only_where_requests_meet(tmp_path):
    """IT011: a server the file starts on the loopback (the default host) or as Flask's debug server serves one
    user; bound to 0.0.0.0 (or started elsewhere) it serves many."""
    bad, _ = CASES["IT011"]
    assert [f.rule for f in check_code(tmp_path, bad).findings] == ["IT011"]
    for local in ("uvicorn.run(app)", 'uvicorn.run(app, host="127.0.0.1")', 'app.run(host="0.0.0.0", debug=True)'):
        assert check_code(tmp_path, bad + f"\nimport uvicorn\n{local}\n").findings == [], local
    public = bad + '\nimport uvicorn\nuvicorn.run(app, host="0.0.0.0", port=80)\n'
    assert [f.rule for f in check_code(tmp_path, public).findings] == ["IT011"]
    handed = check_code(tmp_path, bad + "\ndef serve(server):\n    server.run()\n")  # an app the file never made
    assert handed.errors == [] and [f.rule for f in handed.findings] == ["IT011"]


def test_placement_reads_sizes_adapters_and_the_cpu_choice(tmp_path):
    """IT002: a model under 5B left on the CPU in a script that names no GPU is a choice, 7B is not; an id that
    names no size takes a published one (StarCoder 15.5B); a PEFT adapter put on the model moves nothing."""

    def rules(model: str, extra: str = "") -> list[str]:
        code = f'model = AutoModelForCausalLM.from_pretrained("{model}", dtype="auto")\n{extra}{GEN}'
        return [f.rule for f in check_code(tmp_path, code).findings]

    assert rules("facebook/nllb-200-3.3B") == [] and rules("microsoft/phi-2") == []
    assert rules("mistralai/Mistral-7B-v0.1") == ["IT002"] and rules("bigcode/starcoder") == ["IT002"]
    assert rules("microsoft/phi-2", 'x = torch.zeros(1).to("cuda")\n') == ["IT002"]  # a GPU named: not a CPU script
    adapter = 'from peft import PeftModel\nmodel = PeftModel.from_pretrained(model, "me/adapter")\n'
    assert rules("mistralai/Mistral-7B-v0.1", adapter) == ["IT002"]


def test_a_prompt_the_adapter_or_the_layout_explains(tmp_path):
    """IT013 is silent where a PEFT adapter sets the prompt format; Mistral's exact `<s>[INST] ... [/INST]` layout
    with a hand-written BOS is one problem, the second BOS (IT025), not also a hand-built template (IT003)."""
    load = 'model = AutoModelForCausalLM.from_pretrained("{}", dtype="auto", device_map="auto")\n'
    raw = 'tok = AutoTokenizer.from_pretrained("{0}")\nids = tok(q, return_tensors="pt").to(model.device)\n'
    gen = "out = model.generate(**ids, max_new_tokens=32)\n"
    chat = load.format("meta-llama/Llama-2-7b-chat-hf") + raw.format("meta-llama/Llama-2-7b-chat-hf") + gen
    assert [f.rule for f in check_code(tmp_path, chat).findings] == ["IT013"]
    adapter = 'from peft import PeftModel\nmodel = PeftModel.from_pretrained(model, "me/adapter")\n'
    assert check_code(tmp_path, chat.replace("tok = ", adapter + "tok = ", 1)).findings == []
    mistral = load.format("mistralai/Mistral-7B-Instruct-v0.1") + raw.format("mistralai/Mistral-7B-Instruct-v0.1")
    exact = mistral.replace("tok(q,", 'tok(f"<s>[INST] {q} [/INST]",') + gen
    assert [f.rule for f in check_code(tmp_path, exact).findings] == ["IT025"]
    squeezed = mistral.replace("tok(q,", 'tok("<s>[INST]" + q + "[/INST]",') + gen
    assert sorted(f.rule for f in check_code(tmp_path, squeezed).findings) == ["IT003", "IT025"]


def test_autograd_is_the_callers_choice_one_level_up(tmp_path):
    """IT030: a forward pass in a function every caller of which runs under no_grad, or in a module's own
    forward (its caller picks the mode), keeps no graph; a function also called with autograd on does."""
    load = 'model = AutoModelForCausalLM.from_pretrained("m")\n'
    helper = "def score(enc):\n    return model(**enc).logits\n"
    guarded = "for enc in batches:\n    with torch.no_grad():\n        score(enc)\n"
    assert check_code(tmp_path, load + helper + guarded).findings == []
    open_call = guarded + "for enc in batches:\n    score(enc)\n"
    assert [f.rule for f in check_code(tmp_path, load + helper + open_call).findings] == ["IT030"]
    module = (
        "class Clf(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        '        self.llm = AutoModelForCausalLM.from_pretrained("m")\n'
        "    def forward(self, enc):\n        return self.llm(**enc).logits\n"
    )
    assert check_code(tmp_path, module).findings == []


def test_a_pipeline_built_in_a_try_and_its_fallback_is_one_budget(tmp_path):
    """IT014: the same pipeline built in a try and again in its except holds one max_length, reported once."""
    build = 'pipe = pipeline("text-generation", model="org/m-1b", device={}, dtype="auto", max_length=250)\n'
    code = (
        "from transformers import pipeline\ntry:\n    "
        + build.format(0)
        + "except RuntimeError:\n    "
        + build.format('"cpu"')
        + "def reply(q):\n    answer = pipe(q)[0]['generated_text'][len(q):]\n    send(text=answer)\n"
    )
    assert [f.rule for f in check_code(tmp_path, code).findings] == ["IT014"]


def test_no_generation_prompt_where_the_template_never_reads_the_flag(tmp_path):
    """IT018: Mistral's and Llama 2's [INST] templates end the user turn with [/INST], the reply's cue."""
    bad, _ = CASES["IT018"]
    assert [f.rule for f in check_code(tmp_path, bad).findings] == ["IT018"]
    mistral = bad.replace('"m"', '"mistralai/Mistral-7B-Instruct-v0.2"')
    assert mistral != bad and check_code(tmp_path, mistral).findings == []


def test_a_bot_messages_text_is_one_string_not_a_conversation(tmp_path):
    """IT004/IT013: `message.text` (aiogram) and `message.content` (discord) are the user's string; a name
    saying `messages` alone may be a chat list, whose pipeline output is the conversation."""
    code = (
        "from transformers import pipeline\n"
        'pipe = pipeline("text-generation", model="org/{}", device=0, dtype="auto", max_new_tokens=64)\n'
        "async def on_message(message):\n"
        '    await message.reply(pipe({})[0]["generated_text"])\n'
    )

    def rules(model: str, arg: str) -> list[str]:  # (IT022, the async handler that blocks, fires on each)
        return sorted(f.rule for f in check_code(tmp_path, code.format(model, arg)).findings if f.rule != "IT022")

    assert rules("docs-gpt", "message.text") == ["IT004"] and rules("docs-gpt", "messages") == []
    assert rules("m-7b-chat", "message.content") == ["IT004", "IT013"]


def test_undefined_names_only_where_nothing_could_bind_them(tmp_path):
    """IT038: one finding at the first name nothing defines; silent for builtins, annotations, names bound in any
    way (imports, defs, loops, except, with, walrus) and for files a star import or exec may fill."""
    code = "out = model.generate(**inputs)\nprint(len(out))\n"
    (f,) = check_code(tmp_path, code, names=True).findings
    assert f.rule == "IT038" and f.line == 3 and "`model`, `inputs`" in f.message
    bound = (
        "def run(inputs: Tensor) -> Output:\n    with open(p := 'x') as fh:\n        return fh, inputs, p\n"
        "for i in range(2):\n    try:\n        run(i)\n    except ValueError as e:\n        print(e, __file__)\n"
    )
    assert check_code(tmp_path, bound, names=True).findings == []
    assert check_code(tmp_path, "from helpers import *\n" + code, names=True).findings == []
    assert check_code(tmp_path, 'exec("model = 1")\n' + code, names=True).findings == []


def test_an_option_no_parser_defines(tmp_path):
    """IT038: `args.x` where no add_argument of the file defines x; one finding per option, one per statement;
    silent where options may come from elsewhere (set_defaults, parents, options from variables)."""
    parser = (
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--model', default='m')\n"
        "p.add_argument('-n', '--max-new', dest='budget', type=int)\n{}args = p.parse_args()\n"
    )
    use = (
        "m = AutoModelForCausalLM.from_pretrained(args.base_model, dtype='auto', device_map='auto')\n"
        "print(args.model, args.budget, args.base_model, args.seed, args.dtype)\n"
    )
    found = check_code(tmp_path, parser.format("") + use, names=True).findings
    assert [(f.rule, f.line) for f in found] == [("IT038", 8), ("IT038", 9)]
    assert "`args.base_model`" in found[0].message and "`args.seed`, `args.dtype`" in found[1].message
    for elsewhere in ("p.set_defaults(seed=0)\n", "p.add_argument(*['--seed'])\n", "p.add_class_arguments(Cfg)\n"):
        code = "class Cfg:\n    seed = 0\n" + parser.format(elsewhere) + use
        assert check_code(tmp_path, code, names=True).findings == [], elsewhere
    given = parser.format("").replace("p.parse_args()", "p.parse_args(namespace=Cfg())")
    assert check_code(tmp_path, "class Cfg:\n    seed = 0\n" + given + use, names=True).findings == []


def test_a_half_precision_whisper_loaded_without_a_dtype(tmp_path):
    """IT001 leaves encoder-decoders alone (T5s, BARTs, Whisper up to large-v2 are fp32 checkpoints) except the
    half-precision ones: Whisper large-v3 (and fine-tunes named after it)."""
    code = (
        "from transformers import WhisperForConditionalGeneration\n"
        'm = WhisperForConditionalGeneration.from_pretrained("{}").to("cuda")\n'
        "out = m.generate(feats.to('cuda'), max_new_tokens=64)\n"
    )
    assert [f.rule for f in check_code(tmp_path, code.format("openai/whisper-large-v3")).findings] == ["IT001"]
    assert [f.rule for f in check_code(tmp_path, code.format("me/whisper-large-v3-ft")).findings] == ["IT001"]
    assert check_code(tmp_path, code.format("openai/whisper-large-v2")).findings == []


def test_inputs_sent_to_cuda_while_the_model_may_stay_on_the_cpu(tmp_path):
    """IT016: the model follows a device chosen at run time (also through torch.device(...)), the inputs go to
    CUDA unconditionally: without a GPU that is a device mismatch."""
    code = (
        'device = {}\nmodel = AutoModelForCausalLM.from_pretrained("m", dtype="auto").to(device)\n'
        'out = model.generate(tok(q, return_tensors="pt").input_ids.to("cuda"), max_new_tokens=8)\n'
    )
    chosen = '"cuda" if torch.cuda.is_available() else "cpu"'
    for device in (chosen, f"torch.device({chosen})"):
        assert [f.rule for f in check_code(tmp_path, code.format(device)).findings] == ["IT016"], device
    assert check_code(tmp_path, code.format('torch.device("cuda")')).findings == []
