"""infertune doctor, the context its rules read before they speak (written from doctor-real-6 and doctor-real-7's
development parts): how often a pass runs, what a checkpoint is, what a folder or helper holds. Each test runs the
real rules on a snippet, the silent shape beside the one that must still fire."""

from tests.doctor.cases import check_code, rules


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


def test_a_model_put_on_the_cpu_in_so_many_words_keeps_fp32(tmp_path):
    """IT001: `.to(device)` where the last assignment of device is 'cpu' (an earlier 'cuda' overwritten) is a
    CPU run by choice; the same with 'cuda' last is not."""
    code = 'device = "{a}"\ndevice = "{b}"\nmodel = AutoModelForCausalLM.from_pretrained("org/m").to(device)\n' + (
        "out = model.generate(**inputs, max_new_tokens=32)\n"
    )
    assert rules(tmp_path, code.format(a="cuda", b="cpu")) == []
    assert rules(tmp_path, code.format(a="cpu", b="cuda")) == ["IT001"]


def test_a_one_shot_printed_probe_shows_its_question_on_purpose(tmp_path):
    """IT004: a question written in the file, its whole output printed once at module level, is read by a person
    who sees both; a chat transcript as the prompt, or the text kept (returned, stored), is still the leak."""
    head = 'model = AutoModelForCausalLM.from_pretrained("org/m-instruct", dtype="auto", device_map="auto")\n'
    gen = 'enc = tok({!r}, return_tensors="pt").to(model.device)\nout = model.generate(**enc, max_new_tokens=64)\n'
    printed = "print(tok.decode(out[0], skip_special_tokens=True))\n"
    kept = "answer = tok.decode(out[0], skip_special_tokens=True)\n"
    assert "IT004" not in rules(tmp_path, head + gen.format("Explain what a function is.") + printed)
    assert "IT004" in rules(tmp_path, head + gen.format("Human: hi\nAssistant:") + printed)
    assert "IT004" in rules(tmp_path, head + gen.format("Explain what a function is.") + kept)


def test_sampling_defaults_of_unknown_weights_are_not_guessed(tmp_path):
    """IT015: temperature without do_sample on weights whose id the file does not give (an adapter's base read
    from its config, a local folder) may be used: their generation_config.json is not known here."""
    gen = "out = model.generate(**inputs, max_new_tokens=32, temperature=0.7)\n"
    load = 'model = AutoModelForCausalLM.from_pretrained({}, dtype="auto", device_map="auto")\n'
    assert "IT015" not in rules(tmp_path, load.format("config.base_model_name_or_path") + gen)
    assert "IT015" not in rules(tmp_path, load.format('"./"') + gen)
    assert "IT015" in rules(tmp_path, load.format('"org/m"') + gen)


def test_bnb_keywords_beside_load_in_4bit_are_read(tmp_path):
    """IT008: from_pretrained builds its BitsAndBytesConfig from bnb_* keywords next to load_in_4bit."""
    code = 'model = AutoModelForCausalLM.from_pretrained("org/m", device_map="auto", load_in_4bit=True{})\n'
    assert rules(tmp_path, code.format(", bnb_4bit_compute_dtype=torch.float16")) == []
    assert rules(tmp_path, code.format("")) == ["IT008"]


def test_a_bart_generate_on_an_untruncated_text_overflows(tmp_path):
    """IT034: BART's own generate on a posted text tokenized with neither truncation nor max_length; a truncated
    one, or a T5, is fine."""
    code = (
        "from transformers import AutoModelForSeq2SeqLM\n"
        'model = AutoModelForSeq2SeqLM.from_pretrained("{m}")\n\n'
        "def summarize(text):\n    enc = tok(text, return_tensors='pt'{k})\n"
        "    return model.generate(**enc, max_new_tokens=120)\n"
    )
    assert rules(tmp_path, code.format(m="../bart-large-cnn", k="")) == ["IT034"]
    assert rules(tmp_path, code.format(m="../bart-large-cnn", k=", truncation=True")) == []
    assert rules(tmp_path, code.format(m="t5-small", k="")) == []


def test_a_parameter_annotated_as_a_list_is_a_batch(tmp_path):
    """IT028: `texts: List[str]` handed whole to a GPU pipeline with no batch_size runs one item at a time."""
    code = (
        "from typing import List\nfrom transformers import pipeline\n"
        'clf = pipeline("sentiment-analysis", model="org/clf", device=0)\n\n'
        "def predict(texts: {}):\n    return clf(texts)\n"
    )
    assert rules(tmp_path, code.format("List[str]")) == ["IT028"]
    assert rules(tmp_path, code.format("str")) == []


def test_a_base_model_answering_the_files_questions_returns_answers(tmp_path):
    """IT004: a larger base release at module level asked questions from a data file writes answers with the
    questions in front; the same model finishing a sentence written in the file shows the continuation."""
    code = (
        "from transformers import pipeline\n"
        'pipe = pipeline("text-generation", model="meta-llama/Llama-3.2-1B", dtype="auto", device_map="auto")\n'
        "answer = pipe({}, max_new_tokens=64)[0]['generated_text']\n"
    )
    assert rules(tmp_path, code.format("open('questions.txt').readline()")) == ["IT004"]
    assert rules(tmp_path, code.format('"The capital of France is"')) == []


def test_a_whisper_large_v3_pipeline_on_the_gpu_needs_a_dtype(tmp_path):
    """IT001: Whisper large-v3 is published in half precision; a pipeline of it on the GPU with no torch_dtype
    loads fp32 on 4.x. On the CPU, or with a dtype, it is fine."""
    code = 'from transformers import pipeline\nasr = pipeline("automatic-speech-recognition", model="openai/whisper-large-v3"{})\n'
    assert rules(tmp_path, code.format(", device=0")) == ["IT001"]
    assert rules(tmp_path, code.format(", device=0, torch_dtype=torch.float16")) == []
    assert rules(tmp_path, code.format(', device="cpu"')) == []


def test_one_message_is_a_string_and_a_conversation_is_a_list(tmp_path):
    """IT013/IT004: `user_message` (one message) handed to a chat pipeline is raw text; `messages` is a list of
    turns the pipeline templates itself."""
    code = (
        "from transformers import pipeline\n"
        'pipe = pipeline("text-generation", model="TinyLlama/TinyLlama-1.1B-Chat-v1.0", dtype="auto")\n\n'
        "def reply(update):\n    {name} = get()\n"
        "    return pipe({name}, max_new_tokens=64)[0]['generated_text']\n"
    )
    assert sorted(rules(tmp_path, code.format(name="user_message"))) == ["IT004", "IT013"]
    assert "IT013" not in rules(tmp_path, code.format(name="messages"))


def test_an_encoder_decoder_pipeline_returns_no_prompt_whatever_its_class(tmp_path):
    """IT004: a pipeline left to infer its task from BlenderBot loaded through AutoModel is an encoder-decoder:
    its output holds no prompt."""
    code = (
        "from transformers import AutoModel, pipeline\n"
        'model = AutoModel.from_pretrained("{m}")\nbot = pipeline(model=model)\n\n'
        "def chat(text):\n    return bot(text)[0]['generated_text']\n"
    )
    assert "IT004" not in rules(tmp_path, code.format(m="facebook/blenderbot-400M-distill"))
    assert "IT004" in rules(tmp_path, code.format(m="org/decoder-lm"))


def test_a_loop_over_a_folders_files_is_a_job_not_a_cpu_demo(tmp_path):
    """IT002: a 3.9B model left on the CPU captioning every image of a folder is a job of hours; the same model
    asked once is a CPU demo by choice."""
    code = (
        "import os\nfrom transformers import Blip2ForConditionalGeneration\n"
        'model = Blip2ForConditionalGeneration.from_pretrained("Salesforce/blip2-opt-2.7b")\n'
        "{}    out = model.generate(**inputs, max_new_tokens=50)\n    print(out)\n"
    )
    assert rules(tmp_path, code.format('for f in os.listdir("images"):\n')) == ["IT002"]
    assert rules(tmp_path, code.format("if True:\n")) == []


def test_a_class_based_views_verb_methods_are_request_handlers(tmp_path):
    """IT023: Flask-RESTful's Resource.post builds its pipeline on every request, like a decorated route."""
    code = (
        "from flask_restful import Resource\nfrom transformers import pipeline\n\n"
        "class Summarize({}):\n    def post(self):\n"
        '        return pipeline("summarization", model="org/sum")(request.form["text"])\n'
    )
    assert rules(tmp_path, code.format("Resource")) == ["IT023"]
    assert rules(tmp_path, code.format("object")) == []


def test_neutral_sampling_values_beside_greedy_are_no_finding(tmp_path):
    """IT015: temperature=1.0, top_k=50 and top_p=1.0 are generate's own defaults: set beside do_sample=False they
    change nothing (a log silenced); top_k=10 would be ignored."""
    gen = "out = model.generate(**inputs, max_new_tokens=32, do_sample=False, temperature=1.0, top_p=1.0, top_k={})\n"
    load = 'model = AutoModelForCausalLM.from_pretrained("org/m", dtype="auto", device_map="auto")\n'
    assert "IT015" not in rules(tmp_path, load + gen.format(50))
    assert "IT015" in rules(tmp_path, load + gen.format(10))


def test_fp16_weights_loaded_only_to_fill_the_cache_run_nowhere(tmp_path):
    """IT031: fp16 weights loaded and never used (a download script) compute nothing on the CPU."""
    load = 'model = AutoModelForCausalLM.from_pretrained("org/m", torch_dtype=torch.float16)\n'
    assert "IT031" not in rules(tmp_path, load)
    assert "IT031" in rules(tmp_path, load + "out = model.generate(**inputs, max_new_tokens=32)\n")


def test_a_tiny_encoders_forward_pass_needs_no_inference_mode(tmp_path):
    """IT030: a 4M-33M encoder's graph for one request is a few MB; a larger model's is not."""
    code = 'model = AutoModel.from_pretrained("{}")\n\ndef embed(enc):\n    return model(**enc).last_hidden_state\n'
    head = "from transformers import AutoModel\n"
    assert rules(tmp_path, head + code.format("sentence-transformers/all-MiniLM-L6-v2")) == []
    assert rules(tmp_path, head + code.format("intfloat/e5-large-v2")) == ["IT030"]


def test_a_name_only_a_function_binds_is_undefined_at_module_level(tmp_path):
    """IT038: Python's scopes: a parameter or local of a function is no name of the module's own code."""
    code = "def generate(model, q):\n    return model.generate(**q, max_new_tokens=8)\n{}print(generate(model, q))\n"
    found = check_code(tmp_path, code.format(""), names=True).findings
    assert [f.rule for f in found] == ["IT038"] and "bound only inside a function" in found[0].message
    bound = 'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto")\nq = {}\n'
    assert check_code(tmp_path, code.format(bound), names=True).findings == []
    declared = "def load():\n    global model, q\n    model, q = 1, 2\n\nload()\n"
    assert check_code(tmp_path, code.format(declared), names=True).findings == []


def test_mean_pooling_is_read_where_the_token_states_were_bound(tmp_path):
    """IT026: `emb = model(**enc).last_hidden_state` then `emb.mean(dim=1)` pools the token states all the same."""
    code = (
        "from transformers import AutoModel\n"
        'model = AutoModel.from_pretrained("BAAI/bge-m3")\n'
        "with torch.no_grad():\n    emb = model(**enc).{}\nvec = emb.mean(dim=1)\n"
    )
    assert rules(tmp_path, code.format("last_hidden_state")) == ["IT026"]
    assert rules(tmp_path, code.format("pooler_output")) == []


def test_a_prompt_length_taken_and_never_used_says_the_prompt_was_meant_to_go(tmp_path):
    """IT004: a local fine-tune's whole output is decoded; the silence for an unknown folder (a completion model,
    maybe) ends where the prompt's length is taken and never used."""
    code = (
        "def run(q):\n"
        '    model = AutoModelForCausalLM.from_pretrained("./merged", dtype="auto", device_map="auto")\n'
        '    enc = tok(q, return_tensors="pt").to(model.device)\n'
        "    out = model.generate(**enc, max_new_tokens=64)\n"
        "    {}\n    return tok.decode(out[0], skip_special_tokens=True)\n"
    )
    assert "IT004" in rules(tmp_path, code.format('n = enc["input_ids"].shape[1]'))
    assert "IT004" not in rules(tmp_path, code.format("n = 0"))


def test_a_registry_key_names_the_checkpoint_of_a_chat_template(tmp_path):
    """IT018: a tokenizer looked up as `models["Llama-2-7b-chat-hf"]["tokenizer"]` is Llama 2's, whose template
    ends the user's turn with [/INST] and never reads add_generation_prompt; another key says nothing."""
    code = (
        "def chat(messages):\n"
        '    model, tok = models["{}"]["model"], models["{}"]["tokenizer"]\n'
        '    ids = tok.apply_chat_template(messages, return_tensors="pt").to("cuda")\n'
        "    return model.generate(ids, max_new_tokens=64)[0, ids.shape[1]:]\n"
    )
    assert rules(tmp_path, code.format("Llama-2-7b-chat-hf", "Llama-2-7b-chat-hf")) == []
    assert rules(tmp_path, code.format("qwen", "qwen")) == ["IT018"]


def test_reading_from_the_development_parts_of_doctor_real_10_and_11(tmp_path):
    """One shape each, the silent one beside the one that fires: a reload that resets used weights (IT039), a
    LangChain LLM's _call (IT013), a max_length at a context's scale (IT014), an adapter's own format (IT003), a
    prompt cut from each decoded item (IT004), one text's token states pooled on axis 0 (IT026)."""
    load = 'model = AutoModelForCausalLM.from_pretrained("org/m-7b", dtype="auto", device_map="auto")\n'
    assert rules(tmp_path, load + load) == ["IT039"]
    assert rules(tmp_path, load + "calibrate(model)\n" + load) == []
    built = load.replace('"org/m-7b"', 'f"org/{name}"')
    assert rules(tmp_path, "name = pick()\n" + built + built) == []
    wrapper = (
        "from langchain.llms.base import LLM\n"
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Meta-Llama-3.1-8B-Instruct", dtype="auto", '
        'device_map="auto")\ntok = AutoTokenizer.from_pretrained("meta-llama/Meta-Llama-3.1-8B-Instruct")\n'
        "class Wrapper({}):\n    def _call(self, prompt, stop=None):\n"
        '        enc = tok(prompt, return_tensors="pt").to(model.device)\n'
        "        out = model.generate(**enc, max_length={})\n"
        "        return tok.decode(out[0, enc['input_ids'].shape[1]:], skip_special_tokens=True)\n"
    )
    assert rules(tmp_path, wrapper.format("LLM", 131072)) == []
    assert rules(tmp_path, wrapper.format("object", 131072)) == ["IT013"]
    assert rules(tmp_path, wrapper.format("LLM", 512)) == ["IT014"]
    adapter = (
        'model = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-Instruct-v0.2", dtype="auto", '
        'device_map="auto")\n{}enc = tok(f"User: {{q}}\\nAssistant:", return_tensors="pt").to(model.device)\n'
        "out = model.generate(**enc, max_new_tokens=64)\nprint(tok.decode(out[0, enc['input_ids'].shape[1]:]))\n"
    )
    assert "IT003" in rules(tmp_path, adapter.format(""))
    assert "IT003" not in rules(
        tmp_path, adapter.format('from peft import PeftModel\nmodel = PeftModel.from_pretrained(model, "./sft")\n')
    )
    cut = (
        load + "def run(prompts):\n    enc = tok(prompts, return_tensors='pt', padding=True).to(model.device)\n"
        "    out = model.generate(**enc, max_new_tokens=64)\n    texts = tok.batch_decode(out, skip_special_tokens=True)\n"
        "    return [t{} for t, p in zip(texts, prompts)]\n"
    )
    assert "IT004" not in rules(tmp_path, cut.format("[len(p):]"))
    assert "IT004" in rules(tmp_path, cut.format(""))
    pooled = (
        'from transformers import AutoModel\nmodel = AutoModel.from_pretrained("BAAI/bge-m3")\n'
        "with torch.no_grad():\n    states = model(**enc).last_hidden_state{}\nvec = states.mean(dim=0)\n"
    )
    assert rules(tmp_path, pooled.format("[0]")) == ["IT026"]
    assert rules(tmp_path, pooled.format("")) == []
