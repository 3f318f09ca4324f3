"""infertune doctor, what doctor-real-18's development part taught (its cases are named in docs/doctor.md). Each
test runs the real rules on a snippet, the silent shape beside the one that must fire."""

from infertune.doctor.nodes import Target
from tests.doctor.cases import check_code


def findings(tmp_path, code: str, target: Target | None = None) -> dict[str, str]:
    return {f.rule: f.message for f in check_code(tmp_path, code, target=target).findings}


def test_phi3_repository_code_fails_from_4_49_and_worked_before(tmp_path):
    """IT012: trust_remote_code=True on Phi-3 runs the repository's own code, which calls a cache method removed in
    4.49: the finding names that failure, and is silent where the pins keep the script before 4.49 (the flag was
    the card's advice then). A Llama checkpoint keeps the general message."""
    code = (
        "from transformers import AutoModelForCausalLM\n"
        'model = AutoModelForCausalLM.from_pretrained("microsoft/{}", dtype="auto", device_map="auto", '
        "trust_remote_code=True)\n"
    )
    phi3 = code.format("Phi-3-mini-4k-instruct")
    assert "get_max_length" in findings(tmp_path, phi3)["IT012"]
    old = Target(transformers_max=(4, 44, 99), version_source="requirements.txt")
    assert "IT012" not in findings(tmp_path, phi3, target=old)
    assert "implements itself" in findings(tmp_path, code.format("phi-2"))["IT012"]


def test_a_speed_test_that_never_reads_its_text_needs_no_chat_format(tmp_path):
    """IT013: a latency benchmark of a chat model that times generate and never decodes what it generates: the
    prompt's format changes no figure it prints. The same script decoding the answer is reported (the question is
    typed, not a fixed sentence, which IT013 leaves alone as a smoke test)."""
    code = (
        "import time\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
        'tok = AutoTokenizer.from_pretrained("meta-llama/Llama-2-7b-chat-hf")\n'
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-chat-hf", dtype="auto", '
        'device_map="auto")\n'
        'ids = tok(input("> "), return_tensors="pt").input_ids.to(model.device)\n'
        "model.generate(ids, max_new_tokens=4)\n"
        "t = time.perf_counter()\nout = model.generate(ids, max_new_tokens=100)\n"
        "print(f'{{100 / (time.perf_counter() - t):.1f}} tokens/s'){}\n"
    )
    assert "IT013" not in findings(tmp_path, code.format(""))
    assert "IT013" in findings(tmp_path, code.format("\nprint(tok.decode(out[0][ids.shape[1]:]))"))


def test_a_small_known_model_over_a_folder_may_run_on_the_cpu(tmp_path):
    """IT002: captioning a folder of images on the CPU is workable with BLIP-base (about 250M parameters, known by
    id); a model of unknown size over the same folder is still reported."""
    code = (
        "import os\nfrom transformers import BlipProcessor, BlipForConditionalGeneration\n"
        'proc = BlipProcessor.from_pretrained("Salesforce/{0}")\n'
        'model = BlipForConditionalGeneration.from_pretrained("Salesforce/{0}")\n'
        "for name in os.listdir('images'):\n"
        "    out = model.generate(**proc(open(name, 'rb'), return_tensors='pt'), max_new_tokens=30)\n"
        "    print(proc.decode(out[0], skip_special_tokens=True))\n"
    )
    assert "IT002" not in findings(tmp_path, code.format("blip-image-captioning-base"))
    assert "IT002" in findings(tmp_path, code.format("blip2-opt-2.7b"))


def test_the_conversational_pipeline_is_gone_from_4_42(tmp_path):
    """IT051: pipeline("conversational") raises on transformers 4.42 and later, silent where the pins keep the script
    before; its call on a Conversation is no discarded answer (IT042), the Conversation holds it. A summarization
    pipeline is reported only where the pins say transformers 5."""
    code = (
        'from transformers import pipeline, Conversation\nchat = pipeline("conversational", model="microsoft/DialoGPT-medium")\n'
        "def respond(text):\n    conversation = Conversation(text)\n    chat(conversation)\n"
        "    return conversation.generated_responses[-1]\n"
    )
    found = findings(tmp_path, code)
    assert "IT051" in found and "IT042" not in found
    assert "IT051" not in findings(tmp_path, code, target=Target(transformers_max=(4, 41, 99), version_source="r.txt"))
    summarize = 'from transformers import pipeline\npipe = pipeline("summarization", model="facebook/bart-large-cnn")\n'
    assert "IT051" not in findings(tmp_path, summarize)
    v5 = Target(transformers_min=(5, 0), version_source="requirements.txt")
    assert "IT051" in findings(tmp_path, summarize, target=v5)


def test_unconditional_generation_has_no_prompt_to_strip(tmp_path):
    """IT004: generating from an empty prompt (only the start token) and decoding the whole output keeps no prompt;
    a written prompt decoded whole is reported."""
    code = (
        "import sys\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "model = AutoModelForCausalLM.from_pretrained(sys.argv[1])\ntok = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "def sample(text):\n"
        "    ids = tok(text, return_tensors='pt').input_ids\n"
        "    return tok.decode(model.generate(input_ids=ids, do_sample=True, max_new_tokens=64)[0])\n"
        "print(sample({}))\n"
    )
    assert "IT004" not in findings(tmp_path, code.format('""'))
    assert "IT004" in findings(tmp_path, code.format("input('> ')"))


def test_please_tell_is_no_chatglm_round_marker(tmp_path):
    """IT003/IT013: "请问：" ("please tell:") inside a question is no ChatGLM "问：" turn opening a line; the chat model
    fed that raw question is IT013's finding, not a hand-built prompt."""
    code = (
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        'tok = AutoTokenizer.from_pretrained("Qwen/Qwen2-7B-Chat")\n'
        'model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2-7B-Chat", dtype="auto", device_map="auto")\n'
        'prompt = "{}"\n'
        "ids = tok(prompt, return_tensors='pt').input_ids.to(model.device)\n"
        "print(tok.decode(model.generate(ids, max_new_tokens=300)[0][ids.shape[1]:]))\n"
    )
    found = findings(tmp_path, code.format("小明：没什么意思。请问：以上“意思”分别是什么意思。"))
    assert "IT013" in found and "IT003" not in found
    assert "IT003" in findings(tmp_path, code.format("[Round 1]\\\\n\\\\n问：你好\\\\n\\\\n答："))


def test_a_cast_after_the_move_to_the_gpu_comes_too_late(tmp_path):
    """IT001: `.cuda()` at the load, then `.half()`: the fp32 copy filled the GPU first; `.half().cuda()` casts on
    the CPU, before the move, and is silent."""
    code = (
        "from transformers import AutoModelForCausalLM\n"
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-chat-hf").{}\n'
        "print(model.generate(ids, max_new_tokens=32))\n"
    )
    assert "IT001" in findings(tmp_path, code.format("cuda().half()"))
    assert "IT001" not in findings(tmp_path, code.format("half().cuda()"))


def test_an_automodel_run_with_its_remote_chat_method_is_generative(tmp_path):
    """IT001: ChatGLM2's documented load is AutoModel with its own code, run through model.chat: a generative model
    whose fp32 load fills the GPU; an AutoModel only encoded with is no generator."""
    code = (
        "from transformers import AutoModel, AutoTokenizer\n"
        'tok = AutoTokenizer.from_pretrained("THUDM/chatglm2-6b", trust_remote_code=True)\n'
        'model = AutoModel.from_pretrained("THUDM/chatglm2-6b", trust_remote_code=True).cuda()\n'
        "{}\n"
    )
    assert "IT001" in findings(tmp_path, code.format("response, history = model.chat(tok, input(), history=[])"))
    assert "IT001" not in findings(tmp_path, code.format("print(model(**tok(input(), return_tensors='pt')))"))


def test_attn_implementation_on_a_tokenizer_call_is_ignored(tmp_path):
    """IT021: attn_implementation handed to apply_chat_template goes to the tokenizer, which has no attention; at the
    model's load it is read."""
    code = (
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        'tok = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-7B-Instruct")\n'
        'model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B-Instruct", dtype="auto", device_map="auto"{})\n'
        "enc = tok.apply_chat_template([{{'role': 'user', 'content': q}}], add_generation_prompt=True, "
        "return_tensors='pt', return_dict=True{})\n"
    )
    assert "IT021" in findings(tmp_path, code.format("", ', attn_implementation="sdpa"'))
    assert "IT021" not in findings(tmp_path, code.format(', attn_implementation="sdpa"', ""))


def test_a_text_generation_pipeline_samples_by_default_from_4_52(tmp_path):
    """IT015: a temperature on a text-generation pipeline with no do_sample is ignored before 4.52 (greedy); from
    4.52 the pipeline's own defaults sample, so pins at 4.52 or later are silent."""
    code = (
        "from transformers import pipeline\n"
        'pipe = pipeline("text-generation", model="TinyLlama/TinyLlama-1.1B-Chat-v1.0", device_map="auto")\n'
        "print(pipe([{'role': 'user', 'content': q}], temperature=0.3, max_new_tokens=64)[0]['generated_text'])\n"
    )
    assert "4.52" in findings(tmp_path, code)["IT015"]
    new = Target(transformers_min=(4, 53), version_source="requirements.txt")
    assert "IT015" not in findings(tmp_path, code, target=new)


def test_a_name_rebound_to_a_pipeline_runs_it(tmp_path):
    """After `pipeline = transformers.pipeline(...)`, `pipeline("Hello AI", max_length=200)` runs that pipeline on a
    two-word prompt (IT014 leaves a budget that whole alone); it builds no new pipeline whose task is "Hello AI"."""
    code = (
        "import transformers\n"
        'pipeline = transformers.pipeline("text-generation", model="tiiuae/falcon-7b", dtype="auto", '
        'device_map="auto")\n'
        'print(pipeline({}, max_length=200, do_sample=True)[0]["generated_text"])\n'
    )
    assert "IT014" not in findings(tmp_path, code.format('"Hello AI"'))
    assert "IT014" in findings(tmp_path, code.format("input()"))


def test_a_device_string_torch_rejects(tmp_path):
    """IT052: "CPU" (upper case) or a typo such as "cudo" raises in .to()/pipeline(); "cuda:0", "cpu" and
    device_map's own words are fine. The load moved to "CPU" is meant for the CPU: silent for IT001."""
    code = (
        "from transformers import AutoModelForCausalLM\n"
        'device = "{}"\n'
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf").to(device)\n'
        "print(model.generate(ids.to(device), max_new_tokens=32))\n"
    )
    found = findings(tmp_path, code.format("CPU"))
    assert "IT052" in found and "IT001" not in found
    piped = 'from transformers import pipeline\npipe = pipeline("text-generation", model="gpt2", device="{}")\n'
    assert "IT052" in findings(tmp_path, piped.format("cudo"))
    for fine in ("cuda:0", "cpu", "mps"):
        assert "IT052" not in findings(tmp_path, piped.format(fine))


def test_bf16_layers_make_4bit_compute_in_bf16(tmp_path):
    """IT008: bitsandbytes' Linear4bit computes in its input's dtype when that is bf16, so a 4-bit load with
    dtype=torch.bfloat16 (or unsloth's FastLanguageModel, which sets the compute dtype) is silent; with fp16 layers
    the fp32 default stays."""
    code = (
        "import torch\nfrom transformers import AutoModelForCausalLM, BitsAndBytesConfig\n"
        "bnb = BitsAndBytesConfig(load_in_4bit=True)\n"
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", quantization_config=bnb, '
        "dtype=torch.{})\n"
    )
    assert "IT008" not in findings(tmp_path, code.format("bfloat16"))
    assert "IT008" in findings(tmp_path, code.format("float16"))
    unsloth = (
        "import torch\nfrom unsloth import FastLanguageModel\n"
        'model, tok = FastLanguageModel.from_pretrained(model_name="microsoft/phi-2", dtype=torch.bfloat16, '
        "load_in_4bit=True)\n"
    )
    assert "IT008" not in findings(tmp_path, unsloth)


def test_bitsandbytes_config_takes_no_unknown_option(tmp_path):
    """IT043: BitsAndBytesConfig's options are a closed list: `load_in_int8` (meant `load_in_8bit`) lands in its
    **kwargs and is ignored; its real options are silent."""
    code = "from transformers import BitsAndBytesConfig\nq = BitsAndBytesConfig({}=True)\n"
    assert "IT043" in findings(tmp_path, code.format("load_in_int8"))
    assert "IT043" not in findings(tmp_path, code.format("load_in_8bit"))


def test_fp16_weights_on_the_scripts_own_cpu_fallback(tmp_path):
    """IT031: float16 fixed at the load while the device falls back to the CPU without a GPU: there the fp16 weights
    run on the CPU; a dtype chosen with the device is silent."""
    code = (
        "import torch\nfrom transformers import AutoModelForCausalLM\n"
        'device = "cuda" if torch.cuda.is_available() else "cpu"\n'
        'model = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-Instruct-v0.3", dtype={}, '
        "device_map=device)\nprint(model.generate(ids, max_new_tokens=8))\n"
    )
    assert "IT031" in findings(tmp_path, code.format("torch.float16"))
    chosen = 'torch.float16 if device == "cuda" else torch.float32'
    assert "IT031" not in findings(tmp_path, code.format(chosen))
