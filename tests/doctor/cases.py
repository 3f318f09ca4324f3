"""The doctor's rule cases: for each rule, code with the mistake and the same code done right (HEAD is prepended
to both), and check_code, which runs every rule on a snippet. Shared by test_doctor.py and test_doctor_rules.py."""

import textwrap

from infertune import doctor
from infertune.doctor.nodes import Target

HEAD = "import torch\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
LOAD = 'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto")\n'

GEN = "out = model.generate(**inputs, max_new_tokens=32)\n"
# a FastAPI app (served on the loopback) whose helper generates
SERVE = (
    "import asyncio\nimport uvicorn\nfrom fastapi import FastAPI\napp = FastAPI()\n\n"
    "def reply(h):\n    return model.generate(**tok(h, return_tensors='pt').to(model.device), max_new_tokens=32)\n\n"
)
CHAT = 'tok = AutoTokenizer.from_pretrained("m")\nmsgs = [{"role": "user", "content": q}]\n'
# rule -> (code with the mistake, the same code done right); HEAD is prepended to both
CASES = {
    "IT025": (
        'tok = AutoTokenizer.from_pretrained("google/gemma-2-2b-it")\n'
        'text = tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)\n'
        'ids = tok(text, return_tensors="pt")\n',
        'tok = AutoTokenizer.from_pretrained("google/gemma-2-2b-it")\n'
        'text = tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)\n'
        'ids = tok(text, add_special_tokens=False, return_tensors="pt")\n',
    ),
    "IT031": (
        'model = AutoModelForCausalLM.from_pretrained("m", dtype=torch.float16, device_map="cpu")\n' + GEN,
        'model = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16, device_map="cpu")\n' + GEN,
    ),
    "IT024": (
        'tok = AutoTokenizer.from_pretrained("m")\ntok.padding_side = "right"\n'
        + LOAD
        + 'enc = tok(prompts, padding=True, return_tensors="pt").to("cuda")\n'
        "out = model.generate(**enc, max_new_tokens=8)\n",
        'tok = AutoTokenizer.from_pretrained("m")\ntok.padding_side = "left"\n'
        + LOAD
        + 'enc = tok(prompts, padding=True, return_tensors="pt").to("cuda")\n'
        "out = model.generate(**enc, max_new_tokens=8)\n",
    ),
    "IT026": (
        'enc = tok(texts, padding=True, return_tensors="pt")\nvec = model(**enc).last_hidden_state.mean(dim=1)\n',
        'enc = tok(texts, padding=True, return_tensors="pt")\nh = model(**enc).last_hidden_state\n'
        'm = enc["attention_mask"].unsqueeze(-1)\nvec = (h * m).sum(1) / m.sum(1)\n',
    ),
    "IT027": (
        LOAD + "while True:\n    ids = model.generate(ids, max_new_tokens=2)\n    print(ids)\n",
        LOAD + "while True:\n    ids = model.generate(ids, max_new_tokens=200)\n    print(ids)\n",
    ),
    "IT028": (
        'clf = pipeline("text-classification", model="m", device=0)\nprint(clf([a, b, c]))\n',
        'clf = pipeline("text-classification", model="m", device=0)\nprint(clf([a, b, c], batch_size=8))\n',
    ),
    "IT030": (
        'model = AutoModelForCausalLM.from_pretrained("m")\nfor enc in batches:\n    logits = model(**enc).logits\n',
        'model = AutoModelForCausalLM.from_pretrained("m")\nwith torch.inference_mode():\n'
        "    for enc in batches:\n        logits = model(**enc).logits\n",
    ),
    "IT032": (
        'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "1"\n'
        'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto").to("cuda:1")\n',
        'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "1"\n'
        'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto").to("cuda:0")\n',
    ),
    "IT033": (
        'tok = AutoTokenizer.from_pretrained("org/m-chat")\n'
        + LOAD
        + "out = model.generate(**inputs, num_beams=4, no_repeat_ngram_size=2, max_new_tokens=9)\n",
        'tok = AutoTokenizer.from_pretrained("org/m-chat")\n'
        + LOAD
        + "out = model.generate(**inputs, num_beams=4, max_new_tokens=9)\n",
    ),
    "IT034": (
        "from transformers import pipeline\n"
        'summarize = pipeline("summarization", model="facebook/bart-large-cnn")\n'
        'with open("talk.txt") as f:\n    text = f.read()\n'
        "print(summarize(text, max_length=120))\n",
        "from transformers import pipeline\n"
        'summarize = pipeline("summarization", model="facebook/bart-large-cnn")\n'
        'with open("talk.txt") as f:\n    text = f.read()\n'
        "print(summarize(text, max_length=120, truncation=True))\n",
    ),
    "IT035": (
        'model = AutoModelForCausalLM.from_pretrained("THUDM/chatglm3-6b", device_map="auto", dtype="auto")\n',
        'model = AutoModelForCausalLM.from_pretrained("THUDM/chatglm3-6b", trust_remote_code=True, revision="abc123", '
        'device_map="auto", dtype="auto")\n',
    ),
    "IT036": (LOAD + "out = model.generate(**inputs)\n", LOAD + "out = model.generate(**inputs, max_new_tokens=256)\n"),
    "IT038": (
        'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto")\nq = "Hi"\n'
        "ids = tokenizer(q, return_tensors='pt').to(model.device)\n",
        'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto")\nq = "Hi"\n'
        'tokenizer = AutoTokenizer.from_pretrained("m")\nids = tokenizer(q, return_tensors="pt").to(model.device)\n',
    ),
    "IT039": (
        'model = AutoModelForCausalLM.from_pretrained("org/m", dtype="auto", device_map="auto")\n'
        'from transformers import pipeline\npipe = pipeline("text-generation", model="org/m")\n',
        'model = AutoModelForCausalLM.from_pretrained("org/m", dtype="auto", device_map="auto")\n'
        'from transformers import pipeline\npipe = pipeline("text-generation", model=model)\n',
    ),
    "IT040": (
        "from peft import prepare_model_for_kbit_training\n"
        + LOAD
        + "model = prepare_model_for_kbit_training(model)\n"
        + GEN,
        "from peft import prepare_model_for_kbit_training\n" + LOAD + "model = prepare_model_for_kbit_training(model)\n"
        "trainer = Trainer(model=model, train_dataset=data)\ntrainer.train()\n",
    ),
    "IT041": (
        "from transformers import AutoModelForSequenceClassification\n"
        'clf = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2)\n',
        "from transformers import AutoModelForSequenceClassification\n"
        'clf = AutoModelForSequenceClassification.from_pretrained("textattack/bert-base-uncased-SST-2")\n',
    ),
    "IT042": (
        LOAD + "def answer(inputs):\n    out = model.generate(**inputs, max_new_tokens=32)\n",
        LOAD + "def answer(inputs):\n    out = model.generate(**inputs, max_new_tokens=32)\n    return out\n",
    ),
    "IT043": (
        "from transformers import BitsAndBytesConfig\n"
        "q = BitsAndBytesConfig(load_in_4bit=True, load_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16)\n",
        "from transformers import BitsAndBytesConfig\n"
        "q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16)\n",
    ),
    "IT044": (  # (reply: a helper of the file that generates, run off the event loop)
        LOAD + SERVE + "history = []\n\n"
        '@app.post("/chat")\nasync def chat(q: str):\n    history.append(q)\n'
        "    return await asyncio.to_thread(reply, history)\n\nuvicorn.run(app)\n",
        LOAD + SERVE + '@app.post("/chat")\nasync def chat(q: str, history: list):\n    history.append(q)\n'
        "    return await asyncio.to_thread(reply, history)\n\nuvicorn.run(app)\n",
    ),
    "IT048": (
        LOAD + "out = model.generate(**inputs, do_sample=True, no_repeat_ngram_size=2, max_new_tokens=64)\n",
        LOAD + "out = model.generate(**inputs, do_sample=True, max_new_tokens=64)\n",
    ),
    "IT049": (
        'model = AutoModelForCausalLM.from_pretrained("google/flan-t5-base")\n',
        'from transformers import AutoModelForSeq2SeqLM\nmodel = AutoModelForSeq2SeqLM.from_pretrained("google/flan-t5-base")\n',
    ),
    "IT050": (
        "import streamlit as st\nfrom transformers import pipeline\n"
        "@st.cache_resource\ndef load():\n    return pipeline('translation', model='Helsinki-NLP/opus-mt-en-de')\n\n"
        'pipe = load()\ntext = st.text_area("Text")\nout = pipe(text)[0]["translation_text"]\nif st.button("Translate"):\n    st.write(out)\n',
        "import streamlit as st\nfrom transformers import pipeline\n"
        "@st.cache_resource\ndef load():\n    return pipeline('translation', model='Helsinki-NLP/opus-mt-en-de')\n\n"
        'pipe = load()\ntext = st.text_area("Text")\nif st.button("Translate"):\n    st.write(pipe(text)[0]["translation_text"])\n',
    ),
    "IT051": (
        'from transformers import pipeline\nchat = pipeline("conversational", model="microsoft/DialoGPT-medium")\n',
        'from transformers import pipeline\nchat = pipeline("text-generation", model="microsoft/DialoGPT-medium")\n',
    ),
    "IT052": (
        'device = "CPU"\nmodel = AutoModelForCausalLM.from_pretrained("gpt2").to(device)\n',
        'device = "cpu"\nmodel = AutoModelForCausalLM.from_pretrained("gpt2").to(device)\n',
    ),
    "IT053": (
        "import librosa\nfrom transformers import WhisperProcessor\n"
        'proc = WhisperProcessor.from_pretrained("openai/whisper-small")\n'
        "audio, sr = librosa.load(path)\nfeats = proc(audio, sampling_rate=16000, return_tensors='pt')\n",
        "import librosa\nfrom transformers import WhisperProcessor\n"
        'proc = WhisperProcessor.from_pretrained("openai/whisper-small")\n'
        "audio, sr = librosa.load(path, sr=16000)\nfeats = proc(audio, sampling_rate=16000, return_tensors='pt')\n",
    ),
    "IT054": (
        "from transformers import WhisperForConditionalGeneration, WhisperProcessor\n"
        'proc = WhisperProcessor.from_pretrained("openai/whisper-small")\n'
        'model = WhisperForConditionalGeneration.from_pretrained("openai/whisper-small")\n'
        "def transcribe(audio):\n    feats = proc(audio, sampling_rate=16000, return_tensors='pt').input_features\n"
        "    return proc.batch_decode(model.generate(feats), skip_special_tokens=True)[0]\n",
        "from transformers import WhisperForConditionalGeneration, WhisperProcessor\n"
        'proc = WhisperProcessor.from_pretrained("openai/whisper-small")\n'
        'model = WhisperForConditionalGeneration.from_pretrained("openai/whisper-small")\n'
        "def transcribe(audio):\n    feats = proc(audio, sampling_rate=16000, return_tensors='pt', truncation=False, "
        "padding='longest', return_attention_mask=True)\n"
        "    return proc.batch_decode(model.generate(**feats), skip_special_tokens=True)[0]\n",
    ),
    "IT055": (
        "from transformers import AutoModelForSeq2SeqLM\n"
        'model = AutoModelForSeq2SeqLM.from_pretrained("google/pegasus-xsum")\n'
        "def summarize(enc):\n    return tok.decode(model.generate(**enc)[0])\n",
        "from transformers import AutoModelForSeq2SeqLM\n"
        'model = AutoModelForSeq2SeqLM.from_pretrained("google/pegasus-xsum")\n'
        "def summarize(enc):\n    return tok.decode(model.generate(**enc)[0], skip_special_tokens=True)\n",
    ),
    "IT056": (
        "from transformers import BitsAndBytesConfig\nbnb = BitsAndBytesConfig(load_in_8bit=True)\n"
        'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto")\n',
        "from transformers import BitsAndBytesConfig\nbnb = BitsAndBytesConfig(load_in_8bit=True)\n"
        'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto", quantization_config=bnb)\n',
    ),
    "IT045": (
        LOAD + "def run(enc):\n    out = model.generate(**enc, max_new_tokens=32)\n"
        "    return tok.batch_decode(out[0], skip_special_tokens=True)\n",
        LOAD + "def run(enc):\n    out = model.generate(**enc, max_new_tokens=32)\n"
        "    return tok.decode(out[0], skip_special_tokens=True)\n",
    ),
    "IT046": (
        'model = AutoModelForCausalLM.from_pretrained("meta/llama-3.2-1b", dtype="auto", device_map="auto")\n',
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", dtype="auto", device_map="auto")\n',
    ),
    "IT047": (
        LOAD + "import time\nt0 = time.perf_counter()\nout = model.generate(**inputs, max_new_tokens=32)\n"
        "print(time.perf_counter() - t0, tok.decode(out[0, inputs['input_ids'].shape[1]:]))\n",
        LOAD + "import time\nmodel.generate(**inputs, max_new_tokens=8)\nt0 = time.perf_counter()\n"
        "out = model.generate(**inputs, max_new_tokens=32)\n"
        "print(time.perf_counter() - t0, tok.decode(out[0, inputs['input_ids'].shape[1]:]))\n",
    ),
    "IT037": (
        'tok = AutoTokenizer.from_pretrained("openai-community/gpt2")\nenc = tok(texts, padding=True, return_tensors="pt")\n',
        'tok = AutoTokenizer.from_pretrained("openai-community/gpt2")\ntok.pad_token = tok.eos_token\n'
        'enc = tok(texts, padding=True, return_tensors="pt")\n',
    ),
    "IT029": (
        LOAD + "answers = [model.generate(**inputs, do_sample=True, max_new_tokens=32) for _ in range(5)]\n",
        LOAD + "out = model.generate(**inputs, do_sample=True, num_return_sequences=5, max_new_tokens=32)\n"
        "for i in range(5):\n    out = model.generate(**batches[i], do_sample=True, max_new_tokens=32)\n    print(out)\n",
    ),
    "IT023": (
        "for q in questions:\n"
        '    model = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto")\n'
        "    answers.append(model.generate(**tok(q, return_tensors='pt').to(model.device), max_new_tokens=8))\n",
        'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto")\n'
        "for q in questions:\n"
        "    answers.append(model.generate(**tok(q, return_tensors='pt').to(model.device), max_new_tokens=8))\n",
    ),
    "IT001": (
        'm = AutoModelForCausalLM.from_pretrained("m", device_map="auto")',
        'm = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16, device_map="auto")',
    ),
    "IT002": (
        'model = AutoModelForCausalLM.from_pretrained("org/m-7b", dtype="auto")\nmodel.eval()\n' + GEN,
        'model = AutoModelForCausalLM.from_pretrained("org/m-7b", dtype="auto")\nmodel.to("cuda")\n' + GEN,
    ),
    "IT003": (
        LOAD + 'tok = AutoTokenizer.from_pretrained("m")\n'
        'ids = tok(f"<|im_start|>user\\n{q}<|im_end|>\\n", return_tensors="pt").to("cuda")\n'
        "model.generate(**ids, max_new_tokens=8)",
        LOAD + CHAT + 'ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt")\n'
        'model.generate(ids.to("cuda"), max_new_tokens=8)',
    ),
    "IT004": (  # (a Hub id: a bare name like "m" is a folder whose contents the file does not tell)
        LOAD.replace('"m"', '"org/m"')
        + "out = model.generate(**inputs, max_new_tokens=32)\nprint(tok.decode(out[0], skip_special_tokens=True))",
        LOAD.replace('"m"', '"org/m"')
        + "out = model.generate(**inputs, max_new_tokens=32)\nprint(tok.decode(out[0, n:], skip_special_tokens=True))",
    ),
    "IT005": (
        LOAD + "from transformers import TextIteratorStreamer\ns = TextIteratorStreamer(tok, skip_prompt=True)\n"
        "model.generate(**inputs, streamer=s, max_new_tokens=32)\nfor t in s:\n    print(t)",
        LOAD + "from threading import Thread\nfrom transformers import TextIteratorStreamer\n"
        "s = TextIteratorStreamer(tok, skip_prompt=True)\n\n"
        "def run():\n    model.generate(**inputs, streamer=s, max_new_tokens=32)\n\n"
        "Thread(target=run).start()\nfor t in s:\n    print(t)",
    ),
    "IT006": (
        LOAD + "model = torch.compile(model)\nmodel.generate(**inputs, max_new_tokens=32)",
        LOAD + 'model.generate(**inputs, cache_implementation="static", max_new_tokens=32)',
    ),
    "IT007": (
        'm = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto", '
        'max_memory={0: "80GiB", "cpu": "200GiB"})',
        'm = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto", '
        'max_memory={0: "64GiB", "cpu": "200GiB"})',
    ),
    "IT008": (
        "from transformers import BitsAndBytesConfig\nq = BitsAndBytesConfig(load_in_4bit=True)",
        "from transformers import BitsAndBytesConfig\n"
        "q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)",
    ),
    "IT009": (
        'm = AutoModelForCausalLM.from_pretrained("m", dtype=torch.float32, device_map="auto", '
        'attn_implementation="flash_attention_2")',
        'm = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16, device_map="auto", '
        'attn_implementation="flash_attention_2")',
    ),
    "IT010": (
        LOAD + "out = model.generate(**inputs, max_new_tokens=64, do_sample=True, top_k=20)",
        LOAD + "out = model.generate(**inputs, max_new_tokens=64, do_sample=True)",
    ),
    "IT011": (
        LOAD + 'from fastapi import FastAPI\napp = FastAPI()\n\n@app.post("/chat")\n'
        "def chat(req):\n    return model.generate(**req.inputs, max_new_tokens=32)",
        LOAD + 'from fastapi import FastAPI\napp = FastAPI()\n\n@app.get("/health")\n'
        'async def health():\n    return {"ok": True}',
    ),
    "IT012": (
        'm = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-v0.1", dtype="auto", trust_remote_code=True,\n'
        '                                         device_map="auto")',
        'm = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-v0.1", dtype="auto", trust_remote_code=False,\n'
        '                                         device_map="auto")',
    ),
    "IT013": (
        'tok = AutoTokenizer.from_pretrained("org/Model-7B-Instruct")\n'
        'model = AutoModelForCausalLM.from_pretrained("org/Model-7B-Instruct", dtype="auto", device_map="auto")\n'
        'ids = tok(q, return_tensors="pt").to(model.device)\nmodel.generate(**ids, max_new_tokens=8)',
        'tok = AutoTokenizer.from_pretrained("org/Model-7B-Instruct")\n'
        'model = AutoModelForCausalLM.from_pretrained("org/Model-7B-Instruct", dtype="auto", device_map="auto")\n'
        'msgs = [{"role": "user", "content": q}]\n'
        'ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt").to(model.device)\n'
        "model.generate(ids, max_new_tokens=8)",
    ),
    "IT014": (LOAD + "model.generate(**inputs, max_length=64)", LOAD + "model.generate(**inputs, max_new_tokens=64)"),
    "IT015": (
        LOAD + "model.generate(**inputs, max_new_tokens=8, num_beams=4, top_p=cfg.top_p)",
        LOAD + "model.generate(**inputs, max_new_tokens=8, num_beams=4)",
    ),
    "IT016": (
        LOAD + 'tok = AutoTokenizer.from_pretrained("m")\nenc = tok(q, return_tensors="pt")\n'
        "model.generate(**enc, max_new_tokens=8)",
        LOAD + 'tok = AutoTokenizer.from_pretrained("m")\nenc = tok(q, return_tensors="pt").to(model.device)\n'
        "model.generate(**enc, max_new_tokens=8)",
    ),
    "IT017": (
        LOAD
        + "from transformers import TextStreamer\nmodel.generate(**inputs, streamer=TextStreamer(tok), max_new_tokens=32)",
        LOAD + "from transformers import TextStreamer\n"
        "model.generate(**inputs, streamer=TextStreamer(tok, skip_prompt=True), max_new_tokens=32)",
    ),
    "IT018": (
        LOAD
        + CHAT
        + 'ids = tok.apply_chat_template(msgs, return_tensors="pt")\nmodel.generate(ids.to("cuda"), max_new_tokens=32)',
        LOAD + CHAT + 'ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt")\n'
        'model.generate(ids.to("cuda"), max_new_tokens=32)',
    ),
    "IT019": (
        LOAD + "model.generate(**inputs, max_tokens=64, frequency_penalty=0.5)",
        LOAD + "model.generate(**inputs, max_new_tokens=64)",
    ),
    "IT020": (LOAD + "model = model.half()", LOAD + "model.eval()"),
    "IT021": (
        'tok = AutoTokenizer.from_pretrained("m", attn_implementation="sdpa")',
        'tok = AutoTokenizer.from_pretrained("m")',
    ),
    "IT022": (
        LOAD + "async def on_message(inputs):\n    return model.generate(**inputs, max_new_tokens=32)",
        LOAD + "import asyncio\n\nasync def on_message(inputs):\n"
        "    return await asyncio.to_thread(model.generate, **inputs)",
    ),
}


def check_code(tmp_path, code: str, name: str = "s.py", target: Target | None = None, names: bool = False):
    """Every rule, the advisory ones off by default too; IT038 (undefined names) only when `names`: the snippets
    read names (q, inputs, enc) a real script would define."""
    f = tmp_path / name
    f.write_text(HEAD + textwrap.dedent(code) + "\n")
    return doctor.check([f], target, select=["ALL"], ignore=[] if names else ["IT038"])


def rules(tmp_path, code: str, target: Target | None = None) -> list[str]:
    """The rules that fire on a snippet, in the order check_code reports them (the real-corpus tests' helper)."""
    return [f.rule for f in check_code(tmp_path, code, target=target).findings]
