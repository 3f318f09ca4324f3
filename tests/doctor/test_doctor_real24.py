"""infertune doctor, what the seventh session's development material taught (cases named in docs/doctor.md). Each
test runs the real rules on a snippet, the silent shape beside the one that must fire."""

from tests.doctor.cases import check_code, rules

SUMMARIZER = (
    "from transformers import PegasusForConditionalGeneration, PegasusTokenizer\n"
    'tok = PegasusTokenizer.from_pretrained("google/pegasus-xsum")\n'
    'model = PegasusForConditionalGeneration.from_pretrained("google/pegasus-xsum")\n'
    "def summarize(text):\n"
    "    enc = tok(text, truncation=True, return_tensors='pt')\n"
    "    summary = model.generate(**enc)\n"
    "{use}\n"
)


def test_encoder_decoder_output_decoded_with_its_special_tokens(tmp_path):
    """IT055: a seq2seq model's ids start with the decoder's start token and end with </s>; decode keeps them.
    Reported for a decode whose text is returned or printed; silent with skip_special_tokens given (either way),
    for a text cleaned afterwards (a replace, a normalizer), for a decode never read, and for a decoder-only model
    (its prompt in the output is IT004's)."""
    assert "IT055" in rules(tmp_path, SUMMARIZER.format(use="    return tok.decode(summary[0])"))
    assert "IT055" in rules(tmp_path, SUMMARIZER.format(use="    print(tok.batch_decode(summary.sequences)[0])"))
    for silent in (
        "    return tok.decode(summary[0], skip_special_tokens=True)",
        "    return tok.batch_decode(summary, skip_special_tokens=False)",
        "    text = tok.decode(summary[0])\n    return text.replace('<pad>', '').replace('</s>', '')",
        "    text = tok.batch_decode(summary)[0]\n    return normalizer(text)",
        "    first = tok.decode(summary[0])\n    return tok.decode(summary[0], skip_special_tokens=True)",
    ):
        assert "IT055" not in rules(tmp_path, SUMMARIZER.format(use=silent)), silent
    causal = (
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        'tok = AutoTokenizer.from_pretrained("gpt2")\n'
        'model = AutoModelForCausalLM.from_pretrained("gpt2")\n'
        "ids = model.generate(**tok('Once', return_tensors='pt'), max_new_tokens=20)\nprint(tok.decode(ids[0]))\n"
    )
    assert "IT055" not in rules(tmp_path, causal)


VIEW = (
    "from transformers import AutoModelForSequenceClassification, AutoTokenizer\n"
    "def review_view(request):\n"
    "    text = request.POST.get('review', '')\n"
    "    {check}\n"
    "        tok = AutoTokenizer.from_pretrained('org/roberta-intent')\n"
    "        model = AutoModelForSequenceClassification.from_pretrained('org/roberta-intent')\n"
    "    return model(**tok(text, truncation=True, return_tensors='pt')).logits.argmax(-1).item()\n"
)


def test_model_loaded_behind_a_request_check_reloads_per_request(tmp_path):
    """IT023: an `if` on the request (a form's validity, the model picked by a value) still loads on every call,
    and a classifier's own forward pass on the request's text counts as running it. Silent behind a real load
    guard (loaded yet? a cache? a switch) and under the main guard."""
    for check in ("if request.method == 'POST':", "if choice == 'roberta':", "if form.is_valid():"):
        assert "IT023" in rules(tmp_path, VIEW.format(check=check)), check
    for guard in ("if model is None:", "if 'model' not in CACHE:", "if not loaded:", "if LOAD_MODEL:"):
        assert "IT023" not in rules(tmp_path, VIEW.format(check=guard)), guard
    main = (
        "from transformers import AutoModelForCausalLM\nimport sys\n"
        "if __name__ == '__main__':\n"
        "    model = AutoModelForCausalLM.from_pretrained('gpt2')\n"
        "    print(model.generate(max_new_tokens=5))\n"
    )
    assert "IT023" not in rules(tmp_path, main)


def test_a_hand_built_prompt_of_several_pieces_is_one_finding(tmp_path):
    """IT003: a transcript built piece by piece (the history's turns in a loop, then the new message) is one
    prompt and one problem (doctor-real-25 a15: reported twice before)."""
    code = (
        "from transformers import pipeline\n"
        'pipe = pipeline("text-generation", model="Qwen/Qwen2.5-0.5B-Instruct")\n'
        "def chat(message, history):\n"
        '    prompt = ""\n'
        "    for user, bot in history:\n"
        '        prompt += f"User: {user}\\nAssistant: {bot}\\n"\n'
        '    prompt += f"User: {message}\\nAssistant:"\n'
        "    return pipe(prompt, max_new_tokens=64, return_full_text=False)[0]['generated_text']\n"
    )
    found = [f.rule for f in check_code(tmp_path, code).findings]
    assert found.count("IT003") == 1, found


def test_auto_class_picked_per_model_in_a_branch_is_not_a_wrong_class(tmp_path):
    """IT049: a T5 branch that loads through AutoModelForSeq2SeqLM an id whose default is decoder-only is the
    file's dispatch per model; unconditionally (or under the main guard) the same load raises."""
    load = "model = AutoModelForSeq2SeqLM.from_pretrained(NAME)\n"
    head = (
        "import os\nfrom transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM\n"
        'NAME = os.getenv("MODEL", "EleutherAI/gpt-neo-1.3B")\n'
    )
    assert "IT049" in rules(tmp_path, head + load)
    assert "IT049" in rules(tmp_path, head + "if __name__ == '__main__':\n    " + load)
    branch = head + "if 't5' in NAME:\n    " + load + "else:\n    model = AutoModelForCausalLM.from_pretrained(NAME)\n"
    assert "IT049" not in rules(tmp_path, branch)


def test_language_specific_bare_encoder_under_a_sentiment_head(tmp_path):
    """IT041: a pre-trained encoder named by family, size and vocabulary only (IndoBERT, a Portuguese BERT, KcBERT)
    has no task head; a name with a task word is a fine-tune. A publisher named `...benchmark` is no benchmark."""
    code = 'from transformers import pipeline\nclf = pipeline("sentiment-analysis", model="{m}")\nprint(clf(text))\n'
    for bare in (
        "indobenchmark/indobert-base-p1",
        "neuralmind/bert-base-portuguese-cased",
        "beomi/kcbert-base",
        "line-corporation/line-distilbert-base-japanese",  # (a publisher's word first: doctor-real-26 a11)
    ):
        assert "IT041" in rules(tmp_path, code.format(m=bare)), bare
    for tuned in (
        "mdhugol/indonesia-bert-sentiment-classification",
        "w11wo/indonesian-roberta-base-sentiment-classifier",
        "siebert/sentiment-roberta-large-english",
    ):
        assert "IT041" not in rules(tmp_path, code.format(m=tuned)), tuned
    timed = code.format(m="beomi/kcbert-base") + "import time\nt0 = time.perf_counter()\n"
    assert "IT041" not in rules(tmp_path, timed)


def test_quantization_config_built_and_never_passed(tmp_path):
    """IT056: a BitsAndBytesConfig nothing reads, and the load beside it takes the full-size weights. Silent once
    the config is passed (directly, or through a dict of options), and when the load quantizes by itself."""
    head = (
        "import torch\nfrom transformers import AutoModelForCausalLM, BitsAndBytesConfig\n"
        "def load(name):\n"
        "    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)\n"
    )
    assert "IT056" in rules(
        tmp_path, head + "    return AutoModelForCausalLM.from_pretrained(name, device_map='auto')\n"
    )
    no_dtype = head.replace(", bnb_4bit_compute_dtype=torch.bfloat16", "")
    found = rules(tmp_path, no_dtype + "    return AutoModelForCausalLM.from_pretrained(name)\n")
    assert "IT056" in found and "IT008" not in found  # (one finding: the unpassed config's dtype is moot)
    for used in (
        "    return AutoModelForCausalLM.from_pretrained(name, device_map='auto', quantization_config=bnb)\n",
        "    opts = {'quantization_config': bnb}\n    return AutoModelForCausalLM.from_pretrained(name, **opts)\n",
        "    return AutoModelForCausalLM.from_pretrained(name, load_in_8bit=True)\n",
    ):
        assert "IT056" not in rules(tmp_path, head + used), used


def test_embedding_model_of_another_library_reloaded_by_streamlit(tmp_path):
    """IT023: sentence-transformers' and LangChain's embedding constructors read a checkpoint's weights, so a
    Streamlit page that builds one at its top level reloads it on every rerun (doctor-real-24 a06). Silent in a
    function cached with st.cache_resource."""
    page = (
        "import streamlit as st\nfrom langchain_huggingface import HuggingFaceEmbeddings\n"
        "{load}\nq = st.text_input('Ask')\nst.write(emb.embed_query(q))\n"
    )
    plain = "emb = HuggingFaceEmbeddings(model_name='intfloat/multilingual-e5-small')"
    assert "IT023" in rules(tmp_path, page.format(load=plain))
    cached = (
        "@st.cache_resource\ndef embeddings():\n"
        "    return HuggingFaceEmbeddings(model_name='intfloat/multilingual-e5-small')\nemb = embeddings()"
    )
    assert "IT023" not in rules(tmp_path, page.format(load=cached))


def test_deepseek_flagships_are_large_chat_models(tmp_path):
    """IT002 and IT013: DeepSeek-V3 names no size and no chat word, yet it is a 671B chat model; its -Base release
    is no chat model."""
    code = (
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        'tok = AutoTokenizer.from_pretrained("deepseek-ai/{m}")\n'
        'model = AutoModelForCausalLM.from_pretrained("deepseek-ai/{m}", dtype="auto")\n'
        "out = model.generate(**tok(question, return_tensors='pt'), max_new_tokens=64)\n"
        "print(tok.decode(out[0][len(question):], skip_special_tokens=True))\n"
    )
    assert {"IT002", "IT013"} <= set(rules(tmp_path, code.format(m="DeepSeek-V3")))
    assert "IT013" not in rules(tmp_path, code.format(m="DeepSeek-V3-Base"))


def test_dialogpt_turn_without_its_eos_token(tmp_path):
    """IT013: DialoGPT's turns end with its EOS token; a user's text encoded without it is continued, not answered.
    Silent with the token appended, and for the conversational pipeline, which ends turns itself."""
    code = (
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        'tok = AutoTokenizer.from_pretrained("microsoft/DialoGPT-small")\n'
        'model = AutoModelForCausalLM.from_pretrained("microsoft/DialoGPT-small")\n'
        "def reply(text):\n"
        "    ids = tok.encode({text}, return_tensors='pt')\n"
        "    out = model.generate(ids, max_new_tokens=40, pad_token_id=tok.eos_token_id)\n"
        "    return tok.decode(out[0, ids.shape[-1]:], skip_special_tokens=True)\n"
    )
    assert "IT013" in rules(tmp_path, code.format(text="text"))
    assert "IT013" not in rules(tmp_path, code.format(text="text + tok.eos_token"))
    conv = (
        "from transformers import Conversation, pipeline\n"
        'chat = pipeline("conversational", model="microsoft/DialoGPT-medium")\n'
        "def respond(text):\n    c = Conversation(text)\n    chat(c)\n    return c.generated_responses[-1]\n"
    )
    assert "IT013" not in rules(tmp_path, conv)


def test_assistant_turn_opened_by_hand_after_the_template(tmp_path):
    """IT018: the templated text extended by hand with the assistant's marker has its turn open (doctor-real-24 d05);
    without the extension the flag is missing."""
    code = (
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        'tok = AutoTokenizer.from_pretrained("allenai/tulu-2-dpo-7b")\n'
        'model = AutoModelForCausalLM.from_pretrained("allenai/tulu-2-dpo-7b", dtype="auto", device_map="auto")\n'
        "prompt = tok.apply_chat_template([{{'role': 'user', 'content': q}}], tokenize=False)\n{extra}"
        "ids = tok(prompt, add_special_tokens=False, return_tensors='pt').input_ids.to(model.device)\n"
        "print(tok.decode(model.generate(ids, max_new_tokens=50)[0][ids.shape[1]:], skip_special_tokens=True))\n"
    )
    assert "IT018" in rules(tmp_path, code.format(extra=""))
    assert "IT018" not in rules(tmp_path, code.format(extra='prompt += "<|assistant|>\\n"\n'))


def test_instructblip_takes_its_instruction_as_plain_text(tmp_path):
    """IT013: InstructBLIP (Vicuna or Flan-T5 inside) has no chat template; its processor takes the instruction as
    plain text beside the image (doctor-real-26 c12). A LLaVA chat checkpoint given a bare prompt stays reported."""
    code = (
        "from transformers import {cls}, AutoProcessor\n"
        'proc = AutoProcessor.from_pretrained("{m}")\n'
        'model = {cls}.from_pretrained("{m}", dtype="auto", device_map="auto")\n'
        "inputs = proc(images=image, text='Describe this frame.', return_tensors='pt').to(model.device)\n"
        "print(proc.batch_decode(model.generate(**inputs, max_new_tokens=64), skip_special_tokens=True))\n"
    )
    blip = code.format(cls="InstructBlipForConditionalGeneration", m="Salesforce/instructblip-vicuna-7b")
    assert "IT013" not in rules(tmp_path, blip)
    llava = code.format(cls="LlavaForConditionalGeneration", m="llava-hf/llava-1.5-7b-hf")
    assert "IT013" in rules(tmp_path, llava)


def test_argparse_options_added_by_a_helper_are_unknown(tmp_path):
    """IT038: a parser handed to a helper (`add_model_arg(parser)`, imported) gains options the file does not show,
    so reading `args.model` is no AttributeError (doctor-real-26 b14); with every option spelled out it is."""
    code = (
        "import argparse\nfrom common import add_model_arg\n"
        "parser = argparse.ArgumentParser()\n{helper}parser.add_argument('--quant')\n"
        "args = parser.parse_args()\nprint(args.model, args.quant)\n"
    )
    found = check_code(tmp_path, code.format(helper="add_model_arg(parser)\n"), names=True).findings
    assert "IT038" not in {f.rule for f in found}
    found = check_code(tmp_path, code.format(helper=""), names=True).findings
    assert "IT038" in {f.rule for f in found}


def test_helper_that_samples_called_n_times_with_the_same_input(tmp_path):
    """IT029: a helper that samples from a fixed prompt, called with nothing (or literals) on every pass of a range
    loop, is the same input generated N times: reported at the call in the loop (doctor-real-26 b05). Silent when
    the loop hands the helper its variable."""
    code = (
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        'tok = AutoTokenizer.from_pretrained("gpt2")\nmodel = AutoModelForCausalLM.from_pretrained("gpt2")\n'
        "def describe(prompt='A product description:'):\n"
        "    ids = tok(prompt, return_tensors='pt')\n"
        "    out = model.generate(**ids, max_new_tokens=40, do_sample=True)\n"
        "    return tok.decode(out[0][ids['input_ids'].shape[1]:], skip_special_tokens=True)\n"
        "for i in range(10):\n    print({call})\n"
    )
    found = check_code(tmp_path, code.format(call="describe()")).findings
    assert [f.line for f in found if f.rule == "IT029"] == [code.count("\n", 0, code.index("{call}")) + 3]
    assert "IT029" not in rules(tmp_path, code.format(call="describe(f'Product {i}:')"))


def test_function_reading_flasks_request_loads_per_request(tmp_path):
    """IT023: a function that reads Flask's `request` and loads a model runs per request, decorated or not
    (doctor-real-26 a14: its route decorator lost). Silent when the load is at module level."""
    code = (
        "from flask import Flask, jsonify, request\n"
        "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer\n"
        "app = Flask(__name__)\n{top}"
        "def translate():\n{inner}"
        "    ids = tok(request.get_json()['text'], return_tensors='pt')\n"
        "    out = model.generate(**ids, max_new_tokens=200)\n"
        "    return jsonify(tok.batch_decode(out, skip_special_tokens=True))\n"
    )
    load = (
        "tok = AutoTokenizer.from_pretrained('facebook/nllb-200-distilled-600M')\n"
        "model = AutoModelForSeq2SeqLM.from_pretrained('facebook/nllb-200-distilled-600M')\n"
    )
    inner = "".join("    " + line + "\n" for line in load.splitlines())
    assert "IT023" in rules(tmp_path, code.format(top="", inner=inner))
    assert "IT023" not in rules(tmp_path, code.format(top=load, inner=""))


def test_caption_generated_from_the_image_alone_holds_no_prompt(tmp_path):
    """IT004: generate(pixel_values=...) with no text ids returns the caption alone, so decoding all of it is right
    (doctor-real-26 c09); a captioner given a text prompt too gets it back in front of the caption."""
    code = (
        "from transformers import AutoProcessor, AutoModelForCausalLM\n"
        'proc = AutoProcessor.from_pretrained("microsoft/git-base-coco")\n'
        'model = AutoModelForCausalLM.from_pretrained("microsoft/git-base-coco")\n'
        "def caption(image, opts):\n"
        "    pixels = proc(images=image, return_tensors='pt').pixel_values\n"
        "    out = model.generate({inputs}, max_new_tokens=30, **opts)\n"
        "    return proc.batch_decode(out, skip_special_tokens=True)[0]\n"
    )
    assert "IT004" not in rules(tmp_path, code.format(inputs="pixel_values=pixels"))
    prompted = "pixel_values=pixels, input_ids=proc(text='a photo of', return_tensors='pt').input_ids"
    assert "IT004" in rules(tmp_path, code.format(inputs=prompted))


def test_vllm_generate_behind_a_transformers_fallback_is_not_transformers(tmp_path):
    """IT036 (and every generate rule): `self.model.generate([prompt], self.sampling_params, use_tqdm=False)` is
    vLLM's, even where the attribute may also hold a transformers model after a fallback (doctor-real-26 b11)."""
    code = (
        "from transformers import AutoModelForCausalLM\nfrom vllm import LLM, SamplingParams\n"
        "class Runner:\n"
        "    def __init__(self, path, use_vllm):\n"
        "        self.use_vllm = use_vllm\n"
        "        self.sampling_params = SamplingParams(max_tokens=512)\n"
        "        if use_vllm:\n            self.model = LLM(model=path)\n"
        "        else:\n            self.model = AutoModelForCausalLM.from_pretrained(path, dtype='auto')\n"
        "    def run(self, prompt):\n"
        "        return self.model.generate([prompt], self.sampling_params, use_tqdm=False)[0].outputs[0].text\n"
    )
    assert "IT036" not in rules(tmp_path, code)
    assert "IT036" in rules(
        tmp_path, code.replace("[prompt], self.sampling_params, use_tqdm=False", "input_ids=prompt")
    )


def test_namespace_parameter_given_something_else_is_not_argparses(tmp_path):
    """IT038: a helper's `args` parameter that every call fills with a SimpleNamespace of its own is no argparse
    namespace, though `args = parser.parse_args()` exists elsewhere (doctor-real-27 b05)."""
    code = (
        "import argparse\nfrom types import SimpleNamespace\n"
        "def load(args):\n    return args.model_name, args.device\n"
        "def main():\n"
        "    parser = argparse.ArgumentParser()\n    parser.add_argument('--model-dir')\n"
        "    args = parser.parse_args()\n"
        "    return load({given})\n"
    )
    found = check_code(
        tmp_path, code.format(given="SimpleNamespace(model_name=args.model_dir, device='cuda')"), names=True
    )
    assert "IT038" not in {f.rule for f in found.findings}
    found = check_code(tmp_path, code.format(given="args"), names=True)
    assert "IT038" in {f.rule for f in found.findings}


def test_forced_bos_token_marks_a_multilingual_encoder_decoder(tmp_path):
    """IT004: a helper handed its model, generating with forced_bos_token_id (NLLB's, M2M100's, mBART-50's target
    language), runs an encoder-decoder: its output holds no source text (doctor-real-27 c11)."""
    code = (
        "def translate(text, model, tokenizer, tgt):\n"
        "    enc = tokenizer(text, return_tensors='pt', truncation=True).to(model.device)\n"
        "    out = model.generate(**enc, {extra}max_new_tokens=200)\n"
        "    return tokenizer.batch_decode(out, skip_special_tokens=True)\n"
    )
    assert "IT004" not in rules(
        tmp_path, code.format(extra="forced_bos_token_id=tokenizer.convert_tokens_to_ids(tgt), ")
    )
    assert "IT004" in rules(tmp_path, code.format(extra=""))
