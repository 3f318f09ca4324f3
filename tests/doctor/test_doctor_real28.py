"""infertune doctor, what the eighth session's development material taught (cases named in docs/doctor.md). Each
test runs the real rules on a snippet, the silent shape beside the one that must fire."""

from tests.doctor.cases import rules

OCR = (
    "from transformers import VisionEncoderDecoderModel, TrOCRProcessor\n"
    "from PIL import Image\n"
    "from app.model import processor, model\n"
    "def read_text(path):\n"
    "    image = Image.open(path).convert('RGB')\n"
    "{features}\n"
    "    ids = model.generate({given}, max_length=128, num_beams=5)\n"
    "    return processor.batch_decode(ids, skip_special_tokens=True)[0]\n"
)


def test_generate_given_an_images_features_alone_holds_no_prompt(tmp_path):
    """IT004 and IT014: a generate whose one input is an image's features (`generate(pixel_values, ...)`, the
    positional form, or by keyword) writes a caption or a transcript: no prompt comes back in front of it and
    max_length counts its tokens alone, whichever model the imported `model` is (doctor-real-28 c10). Text ids
    given to the same call are a prompt again."""
    features = {
        "pixel_values": "    pixel_values = processor(images=image, return_tensors='pt').pixel_values",
        "pixel_values=pixel_values": "    pixel_values = processor(images=image, return_tensors='pt').pixel_values",
        "inputs.pixel_values": "    inputs = processor(images=image, return_tensors='pt')",
        "inputs['pixel_values']": "    inputs = processor(images=image, return_tensors='pt')",
    }
    for given, line in features.items():
        found = rules(tmp_path, OCR.format(features=line, given=given))
        assert "IT004" not in found and "IT014" not in found, given
    asked = "    ids_in = processor.tokenizer(question, return_tensors='pt').input_ids"
    found = rules(tmp_path, OCR.format(features=asked, given="ids_in").replace("(path)", "(path, question)"))
    assert "IT004" in found and "IT014" in found


def test_rows_decoded_in_a_comprehension_are_the_generate_output(tmp_path):
    """IT004: `[tok.decode(row) for row in out]` decodes each full row of generate's output, prompt included, as a
    `for row in out:` loop does (doctor-real-28 b13); silent where each row is sliced past the prompt first."""
    code = (
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "class Runner:\n"
        "    def __init__(self, path):\n"
        "        self.tok = AutoTokenizer.from_pretrained(path)\n"
        "        self.model = AutoModelForCausalLM.from_pretrained(path)\n"
        "    def answer(self, questions):\n"
        "        enc = self.tok(questions, return_tensors='pt', padding=True)\n"
        "        out = self.model.generate(**enc, max_new_tokens=64)\n"
        "        return [self.tok.decode({row}, skip_special_tokens=True) for r in out]\n"
    )
    assert "IT004" in rules(tmp_path, code.format(row="r"))
    assert "IT004" not in rules(tmp_path, code.format(row="r[enc.input_ids.shape[1]:]"))


def test_a_streamlit_page_reloads_once_per_loader_function(tmp_path):
    """IT023: a Streamlit page reruns on every interaction; each function of it that loads a model (one per model
    the page offers) is one problem, and the loads of one function, of one class's methods or of its module level
    are one (doctor-real-23 a07: three loaders, labelled three times; doctor-real-9 k15: a model and its tokenizer,
    labelled once; doctor-real-5 p17: six methods of one class, labelled once)."""
    loader = (
        "def {name}(text):\n"
        "    tok = AutoTokenizer.from_pretrained('{id}')\n"
        "    model = AutoModelForCausalLM.from_pretrained('{id}')\n"
        "    return tok.decode(model.generate(**tok(text, return_tensors='pt'), max_new_tokens=40)[0])\n"
    )
    page = (
        "import streamlit as st\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        + loader.format(name="calm", id="cyberagent/open-calm-small")
        + loader.format(name="rinna", id="rinna/japanese-gpt-neox-small")
        + "text = st.text_input('input:')\n"
        "if text:\n"
        "    st.write(calm(text) if st.checkbox('calm') else rinna(text))\n"
    )
    assert rules(tmp_path, page).count("IT023") == 2
    one = (
        "import streamlit as st\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        + loader.format(name="calm", id="cyberagent/open-calm-small")
        + "text = st.text_input('input:')\n"
        "if text:\n"
        "    st.write(calm(text))\n"
    )
    assert rules(tmp_path, one).count("IT023") == 1
    methods = page.replace("def calm(", "class Pick:\n  def calm(self, ").replace("def rinna(", "  def rinna(self, ")
    methods = methods.replace("calm(text) if", "Pick().calm(text) if").replace("else rinna(", "else Pick().rinna(")
    assert rules(tmp_path, methods).count("IT023") == 1


def test_weights_named_by_a_quantized_config_entry_load_quantized(tmp_path):
    """IT001: a load with no dtype whose weights come from an expression that says GPTQ or AWQ
    (`gptq_cfg["model_name"]`, `args.awq_model`) loads a pre-quantized checkpoint, whose quantizer picks fp16
    (doctor-real-28 b10: a benchmark's GPTQ and AWQ branches, labelled silent); a plain name still loads fp32."""
    code = (
        "import torch\n"
        "from transformers import AutoModelForCausalLM\n"
        "def load(cfg, args):\n"
        "    model = AutoModelForCausalLM.from_pretrained({weights}, device_map='cuda')\n"
        "    return model.generate(max_new_tokens=8)\n"
    )
    for weights in ('cfg["gptq"]["model_name"]', "args.awq_model", "gptq_cfg['model_name']"):
        assert "IT001" not in rules(tmp_path, code.format(weights=weights)), weights
    assert "IT001" in rules(tmp_path, code.format(weights="args.model_name"))


def test_half_precision_chosen_for_the_machine_without_cuda(tmp_path):
    """IT031: `bfloat16 if torch.cuda.is_available() else float16` gives fp16 weights exactly where there is no GPU,
    so on the CPU (doctor-real-27 d06); silent for the usual way round, for float32 on that branch, and for a test
    of bf16 support, which runs on a GPU (doctor-real-28 d03)."""
    code = (
        "import torch\n"
        "from transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('./merged', device_map='auto', torch_dtype={dtype})\n"
        "print(model.generate(max_new_tokens=8))\n"
    )
    fires = (
        "torch.bfloat16 if torch.cuda.is_available() else torch.float16",
        "torch.float16 if not torch.cuda.is_available() else torch.bfloat16",
    )
    for dtype in fires:
        assert "IT031" in rules(tmp_path, code.format(dtype=dtype)), dtype
    for dtype in (
        "torch.float16 if torch.cuda.is_available() else torch.float32",
        "torch.bfloat16 if torch.cuda.is_available() else torch.float32",
        "torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16",
    ):
        assert "IT031" not in rules(tmp_path, code.format(dtype=dtype)), dtype


STREAM = (
    "from threading import Thread\n"
    "from fastapi import FastAPI\n"
    "from fastapi.responses import StreamingResponse\n"
    "from transformers import AutoModelForCausalLM, AutoTokenizer, TextIteratorStreamer\n"
    "app = FastAPI()\n"
    "tok = AutoTokenizer.from_pretrained('TinyLlama/TinyLlama-1.1B-Chat-v1.0')\n"
    "model = AutoModelForCausalLM.from_pretrained('TinyLlama/TinyLlama-1.1B-Chat-v1.0')\n"
    "async def tokens(prompt):\n"
    "    streamer = TextIteratorStreamer(tok, skip_prompt=True, skip_special_tokens=True)\n"
    "    kwargs = dict(tok(prompt, return_tensors='pt'), streamer=streamer, max_new_tokens=256)\n"
    "    Thread(target=model.generate, kwargs=kwargs).start()\n"
    "{read}\n"
    "@app.post('/chat')\n"
    "async def chat(prompt: str):\n"
    "    return StreamingResponse(tokens(prompt), media_type='text/event-stream')\n"
)


def test_a_text_streamer_read_on_the_event_loop_blocks_it(tmp_path):
    """IT022: an async function that iterates a TextIteratorStreamer (`for t in streamer`, `"".join(streamer)`)
    waits on its queue for every token on the event loop, so the server serves nothing else until the answer ends
    (doctor-real-27 d07, -25 d14). Silent where each read runs in the default executor."""
    for read in ("    for text in streamer:\n        yield text", "    yield ''.join(streamer)"):
        assert "IT022" in rules(tmp_path, STREAM.format(read=read)), read
    offloaded = (
        "    loop = asyncio.get_running_loop()\n"
        "    while (text := await loop.run_in_executor(None, lambda: next(streamer, None))) is not None:\n"
        "        yield text"
    )
    assert "IT022" not in rules(tmp_path, "import asyncio\n" + STREAM.format(read=offloaded))


def test_input_padded_past_the_generate_cap_is_an_encoder_decoders(tmp_path):
    """IT004 and IT014: an input padded to 512 tokens (`padding="max_length"`) and a generate capped at
    max_length=150 leave a decoder-only model no room for a token, so the imported model is an encoder-decoder,
    whose output holds no prompt (doctor-real-28 a10, a summarizer); padding shorter than the cap says nothing."""
    code = (
        "from config import model, tokenizer\n"
        "def summarize(dialogue):\n"
        "    enc = tokenizer(dialogue, padding='max_length', max_length={pad}, truncation=True, return_tensors='pt')\n"
        "    out = model.generate(input_ids=enc['input_ids'], attention_mask=enc['attention_mask'], max_length=150)\n"
        "    return tokenizer.decode(out[0], skip_special_tokens=True)\n"
    )
    found = rules(tmp_path, code.format(pad=512))
    assert "IT004" not in found and "IT014" not in found
    found = rules(tmp_path, code.format(pad=64))
    assert "IT004" in found and "IT014" in found


def test_inputs_moved_to_the_picked_accelerator_while_the_model_stays(tmp_path):
    """IT016: the script picks MPS (or CUDA) when there is one and moves the inputs there, but the model's own move
    is missing (commented out): generate raises a device mismatch (doctor-real-28 b09). One finding per model,
    however many generates; silent once the model moves too."""
    code = (
        "import torch\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "def get_device():\n"
        "    return torch.device('mps') if torch.backends.mps.is_available() else torch.device('cpu')\n"
        "device = get_device()\n"
        "tok = AutoTokenizer.from_pretrained('distilgpt2')\n"
        "model = AutoModelForCausalLM.from_pretrained('distilgpt2')\n"
        "{move}\n"
        "warm = tok('Warm up.', return_tensors='pt').to(device)\n"
        "model.generate(**warm, max_new_tokens=8)\n"
        "for p in ['a', 'b']:\n"
        "    enc = tok(p, return_tensors='pt').to(device)\n"
        "    model.generate(**enc, max_new_tokens=32)\n"
    )
    assert rules(tmp_path, code.format(move="# model.to(device)")).count("IT016") == 1
    assert "IT016" not in rules(tmp_path, code.format(move="model.to(device)"))


def test_the_whole_text_decoded_only_when_the_cut_fails(tmp_path):
    """IT004: the answer is cut out after the assistant header in a `try`, and the `except IndexError:` fallback
    decodes the whole output: the error path's text, not the function's answer (doctor-real-25 d07). Without the
    cut, the same fallback is the only decode and is reported."""
    code = (
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained('meta-llama/Meta-Llama-3-8B-Instruct')\n"
        "model = AutoModelForCausalLM.from_pretrained('meta-llama/Meta-Llama-3-8B-Instruct', device_map='auto')\n"
        "def answer(question):\n"
        "    ids = tok.apply_chat_template([{{'role': 'user', 'content': question}}], add_generation_prompt=True,"
        " return_tensors='pt').to(model.device)\n"
        "    out = model.generate(ids, max_new_tokens=256)\n"
        "    text = tok.decode(out[0], skip_special_tokens=False)\n"
        "    try:\n"
        "        reply = {cut}\n"
        "    except IndexError:\n"
        "        reply = tok.decode(out[0], skip_special_tokens=True)\n"
        "    return reply\n"
    )
    cut = "text.split('<|start_header_id|>assistant<|end_header_id|>')[1].split('<|eot_id|>')[0]"
    assert "IT004" not in rules(tmp_path, code.format(cut=cut))
    assert "IT004" in rules(tmp_path, code.format(cut="int(question)"))


def test_a_gpu_named_only_in_docstrings_is_no_gpu_intent(tmp_path):
    """IT002: a job whose docstrings say how one could use a GPU ("tune up to 32 on GPU") but whose code never
    does runs on the CPU on purpose (doctor-real-28 b01: "this repo targets CPU-only laptop grading"); the same
    words in code (a device string) are the intent they always were."""
    code = (
        '"""Batch inference for one batch: CPU-only workers; switch to a GPU for throughput."""\n'
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "class Predictor:\n"
        '    """Loads the model once per worker (pass device="cuda" for a GPU)."""\n'
        "    def __init__(self, name):\n"
        "        self.tok = AutoTokenizer.from_pretrained(name)\n"
        "        self.model = AutoModelForCausalLM.from_pretrained(name)\n"
        "    def __call__(self, prompts):\n"
        "        enc = self.tok(prompts, return_tensors='pt', padding=True)\n"
        "        return self.model.generate(**enc, max_new_tokens=64)\n"
        "{extra}"
    )
    assert "IT002" not in rules(tmp_path, code.format(extra=""))
    assert "IT002" in rules(tmp_path, code.format(extra="DEVICE = 'cuda'\n"))


def test_a_prompt_filled_by_format_holds_what_fills_it(tmp_path):
    """IT013 and IT003: a prompt template filled by `.format(b_inst=B_INST, ...)` holds the [INST] markers its
    fields receive, so it is a hand-built chat prompt (IT003's question), not raw text fed to a chat model
    (doctor-real-29 a13, ELYZA's Llama-2 format)."""
    code = (
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "B_INST, E_INST = '[INST]', '[/INST]'\n"
        "NAME = 'meta-llama/Llama-2-7b-chat-hf'\n"
        "tok = AutoTokenizer.from_pretrained(NAME)\n"
        "model = AutoModelForCausalLM.from_pretrained(NAME, device_map='auto', torch_dtype='auto')\n"
        "def answer(text):\n"
        "    prompt = '{b} {p} {e} '.format(b=B_INST, p=text, e=E_INST)\n"
        "    ids = tok.encode(prompt, return_tensors='pt').to(model.device)\n"
        "    out = model.generate(ids, max_new_tokens=256)\n"
        "    return tok.decode(out[0][ids.shape[1]:], skip_special_tokens=True)\n"
    )
    found = rules(tmp_path, code)
    assert "IT013" not in found and "IT003" in found
