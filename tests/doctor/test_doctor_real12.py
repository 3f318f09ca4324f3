"""infertune doctor, what doctor-real-12's development part taught (its cases are named in docs/doctor.md): an n-gram
ban that reads the prompt, a bot's shared history, LangChain's full text, a max_length far above a typed prompt,
ids and numbers bound by name, BLIP's VQA head. Each test runs the real rules on a snippet, the silent shape beside
the one that must fire."""

from tests.doctor.cases import check_code, rules

LOAD = 'model = AutoModelForCausalLM.from_pretrained("{}", dtype="auto", device_map="auto")\n'
GEN = "out = model.generate(**enc, do_sample=True, max_new_tokens=200{})\nprint(tok.decode(out[0, n:]))\n"


def test_an_ngram_ban_on_a_decoder_only_model_reads_the_prompt(tmp_path):
    """IT048: size 2 on any decoder-only model; 3 only where the prompt is a conversation (a chat template or a chat
    checkpoint); never on an encoder-decoder; beam search on a chat model is IT033's, once."""
    base = LOAD.format("EleutherAI/gpt-neo-1.3B")
    assert rules(tmp_path, base + GEN.format(", no_repeat_ngram_size=2")) == ["IT048"]
    assert rules(tmp_path, base + GEN.format(", no_repeat_ngram_size=3")) == []
    assert rules(tmp_path, base + GEN.format("")) == []
    chat = LOAD.format("Qwen/Qwen2.5-1.5B-Instruct")
    assert rules(tmp_path, chat + GEN.format(", no_repeat_ngram_size=3")) == ["IT048"]
    assert rules(tmp_path, chat + GEN.format(", num_beams=4, no_repeat_ngram_size=3")) == ["IT033"]
    seq2seq = (
        "from transformers import AutoModelForSeq2SeqLM\n"
        'model = AutoModelForSeq2SeqLM.from_pretrained("facebook/bart-large-cnn")\n'
        "out = model.generate(**enc, num_beams=4, no_repeat_ngram_size=2, max_new_tokens=60)\n"
    )
    assert rules(tmp_path, seq2seq) == []
    named = base + "N = 2\n" + GEN.format(", no_repeat_ngram_size=N")
    assert rules(tmp_path, named) == ["IT048"]


BOT = (
    "from telegram.ext import Application, MessageHandler, filters\n"
    'model = AutoModelForCausalLM.from_pretrained("microsoft/DialoGPT-medium")\n'
    "chat_history_ids = None\n\n"
    "async def chat(update, context):\n"
    "    global chat_history_ids\n"
    "    ids = tok.encode(update.message.text + tok.eos_token, return_tensors='pt')\n"
    "    chat_history_ids = model.generate(ids, max_new_tokens=60, pad_token_id=tok.eos_token_id){}\n"
    "    await update.message.reply_text(tok.decode(chat_history_ids[0, ids.shape[-1]:]))\n\n"
    "app = Application.builder().token(TOKEN).build()\n"
    "app.add_handler(MessageHandler(filters.TEXT, chat))\n"
)


def test_a_bot_handler_rewriting_a_module_level_history_shares_it(tmp_path):
    """IT044 reads a chat bot's message handlers as it reads web routes (IT022 speaks too: generate on the loop)."""
    assert "IT044" in rules(tmp_path, BOT.format(""))
    private = BOT.replace("    global chat_history_ids\n", "").replace("chat_history_ids = None\n\n", "")
    assert "IT044" not in rules(tmp_path, private.format(""))
    cli = (
        "import typer\napp = typer.Typer()\n"
        'model = AutoModelForCausalLM.from_pretrained("microsoft/DialoGPT-medium")\nhistory = []\n\n'
        "@app.command()\ndef chat(q: str):\n    history.append(q)\n"
        "    out = model.generate(**tok(' '.join(history), return_tensors='pt'), max_new_tokens=60)\n"
        "    print(tok.decode(out[0]))\n"
    )
    assert "IT044" not in rules(tmp_path, cli)


WRAPPED = (
    "from {} import HuggingFacePipeline\nfrom transformers import pipeline\n"
    'pipe = pipeline("text-generation", model="TinyLlama/TinyLlama-1.1B-Chat-v1.0", max_new_tokens=100{})\n'
    "llm = HuggingFacePipeline(pipeline=pipe)\n"
    "print(llm.invoke(prompt))\n"
)


def test_langchain_huggingface_pipeline_returns_the_prompt_with_the_answer(tmp_path):
    """IT004: the new packages' wrapper returns generated_text whole; the old langchain.llms one cut the prompt.
    (IT013 speaks too: the chat model gets raw text through the wrapper.)"""

    def it004(code: str) -> bool:
        return "IT004" in rules(tmp_path, code)

    assert it004(WRAPPED.format("langchain_huggingface", ""))
    assert it004(WRAPPED.format("langchain_community.llms", ""))
    assert not it004(WRAPPED.format("langchain_huggingface", ", return_full_text=False"))
    assert not it004(WRAPPED.format("langchain.llms", ""))
    skipped = WRAPPED.format("langchain_huggingface", "").replace("invoke(prompt)", "invoke(prompt, skip_prompt=True)")
    assert not it004(skipped)
    unused = WRAPPED.format("langchain_huggingface", "").replace("print(llm.invoke(prompt))\n", "")
    assert rules(tmp_path, unused) == []
    by_id = (
        "from langchain_huggingface import HuggingFacePipeline\n"
        'llm = HuggingFacePipeline.from_model_id(model_id="TinyLlama/TinyLlama-1.1B-Chat-v1.0", '
        'task="text-generation", pipeline_kwargs={{"max_new_tokens": 100{}}})\nanswer = llm.invoke(question)\n'
    )
    assert rules(tmp_path, by_id.format("")) == ["IT004", "IT013"]
    assert rules(tmp_path, by_id.format(', "return_full_text": False')) == ["IT013"]


TYPED = (
    LOAD.format("Qwen/Qwen2.5-1.5B-Instruct")
    + "def answer({arg}):\n    enc = tok({prompt}, return_tensors='pt').to(model.device)\n"
    "    out = model.generate(**enc, max_length={n})\n"
    "    return tok.decode(out[0, enc['input_ids'].shape[1]:], skip_special_tokens=True)\n"
)


def test_a_max_length_far_above_a_typed_prompt_is_a_ceiling(tmp_path):
    """IT014: 1000 tokens or more over a typed question is a ceiling; over retrieved text it is still eaten; a
    context's own scale (8192) never is."""
    assert "IT014" in rules(tmp_path, TYPED.format(arg="q", prompt="q", n=256))
    assert "IT014" not in rules(tmp_path, TYPED.format(arg="q", prompt="q", n=1512))
    assert "IT014" in rules(tmp_path, TYPED.format(arg="refs, q", prompt="refs + q", n=1024))
    assert "IT014" not in rules(tmp_path, TYPED.format(arg="refs, q", prompt="refs + q", n=8192))


def test_a_max_length_and_an_id_bound_by_name_are_read_as_their_literals(tmp_path):
    """IT014 reads `max_length = 256` through the name (a twenty-token literal prompt leaves the budget whole);
    IT002 reads a model id joined from literals (`"./" + name`) with the size it names."""
    literal = (
        LOAD.format("m") + 'enc = tok("There is a place where time stands still, a place of wonder", '
        'return_tensors="pt").to(model.device)\nlimit = {}\nout = model.generate(**enc, max_length=limit)\n'
        "print(tok.decode(out[0, enc['input_ids'].shape[1]:]))\n"
    )
    assert "IT014" not in rules(tmp_path, literal.format(256))
    assert "IT014" in rules(tmp_path, literal.format(32))
    joined = (
        'from transformers import pipeline\nname = "phi-4-28.3B-zero"\npath = "./" + name\n'
        'pipe = pipeline("text-generation", model=path)\nprint(pipe(messages)[0]["generated_text"][-1])\n'
    )
    assert "IT002" in rules(tmp_path, joined)
    assert "IT002" not in rules(tmp_path, joined.replace("28.3B", "0.5B"))


def test_blip_vqa_answers_hold_no_question(tmp_path):
    """IT004 and IT036 are silent on BlipForQuestionAnswering (its answer decoder starts from BOS); a decoder-only
    model's generate with the same code keeps both."""
    code = (
        "from transformers import BlipProcessor, {cls}\n"
        'processor = BlipProcessor.from_pretrained("Salesforce/blip-vqa-base")\n'
        'model = {cls}.from_pretrained("Salesforce/blip-vqa-base")\n'
        'inputs = processor(image, "What color is the sky?", return_tensors="pt")\n'
        "out = model.generate(**inputs)\nprint(processor.decode(out[0], skip_special_tokens=True))\n"
    )
    assert rules(tmp_path, code.format(cls="BlipForQuestionAnswering")) == []
    assert set(rules(tmp_path, code.format(cls="AutoModelForCausalLM"))) >= {"IT004", "IT036"}


def test_a_chat_model_behind_langchains_llm_wrapper_gets_raw_text(tmp_path):
    """IT013: HuggingFacePipeline (any LangChain package) hands a chat model the prompt string as it is; ChatHuggingFace
    or a template the file renders is silent, and so is a base model."""
    chain = (
        "from langchain.llms import HuggingFacePipeline\nfrom langchain.chains import RetrievalQA\n"
        "from transformers import pipeline\n"
        'pipe = pipeline("text-generation", model="{}", device_map="auto", dtype="auto", max_new_tokens=256, '
        "return_full_text=False)\n"
        "llm = HuggingFacePipeline(pipeline=pipe)\n"
        'qa = RetrievalQA.from_chain_type(llm=llm, chain_type="stuff", retriever=retriever)\n'
        'print(qa.run("What does the report say about revenue?"))\n'
    )
    assert rules(tmp_path, chain.format("mistralai/Mistral-7B-Instruct-v0.1")) == ["IT013"]
    assert rules(tmp_path, chain.format("mistralai/Mistral-7B-v0.1")) == []
    chat = (
        chain.format("mistralai/Mistral-7B-Instruct-v0.1")
        .replace("qa = RetrievalQA", "from langchain_huggingface import ChatHuggingFace\nqa = RetrievalQA")
        .replace("llm=llm,", "llm=ChatHuggingFace(llm=llm),")
    )
    assert rules(tmp_path, chat) == []


def test_a_tokenizer_read_per_request_is_a_reload_when_its_model_is_not(tmp_path):
    """IT023 reads tokenizer loads too, once per scope: a handler that loads both is one finding, at the model."""
    route = (
        "from fastapi import FastAPI\napp = FastAPI()\n"
        'model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct", dtype="auto", device_map="auto")\n'
        '@app.post("/ask")\ndef ask(q: str):\n{}'
        '    tok = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct")\n'
        '    msgs = [{{"role": "user", "content": q}}]\n'
        "    enc = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors='pt', return_dict=True)\n"
        "    out = model.generate(**enc.to(model.device), max_new_tokens=64)\n"
        "    return tok.decode(out[0, enc['input_ids'].shape[1]:], skip_special_tokens=True)\n"
    )
    assert rules(tmp_path, route.format("")) == ["IT023"]
    both = route.format(
        '    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct", dtype="auto", '
        'device_map="auto")\n'
    )
    found = check_code(tmp_path, both).findings
    assert [(f.rule, f.line) for f in found] == [("IT023", 8)]  # (the handler's model load, not its tokenizer's)
