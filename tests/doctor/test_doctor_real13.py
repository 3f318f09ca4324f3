"""infertune doctor, what doctor-real-13's development part taught (its cases are named in docs/doctor.md): one pass
of a base-size encoder per request, a profiler's untrained head, a pipeline's length before transformers 4.52, and a
conversation handed to a pipeline. Each test runs the real rules on
a snippet, the silent shape beside the one that must fire."""

from infertune.doctor.nodes import Target
from tests.doctor.cases import rules

ROUTE = (
    "from fastapi import FastAPI\nfrom transformers import AutoModelForSequenceClassification\napp = FastAPI()\n"
    'tok = AutoTokenizer.from_pretrained("{m}")\nmodel = AutoModelForSequenceClassification.from_pretrained("{m}")\n'
    '@app.post("/predict")\ndef predict(text: str):\n{body}'
)
ONE = "    logits = model(**tok(text, return_tensors='pt')).logits\n    return int(logits.argmax())\n"
LOOP = "    return [int(model(**tok(t, return_tensors='pt')).logits.argmax()) for t in text.split('\\n')]\n"


def test_one_pass_of_a_base_size_model_per_request_keeps_autograd_quietly(tmp_path):
    """IT030: a base-size checkpoint's one pass per call is a few MB of graph; a large one's, or a loop of passes,
    is reported."""
    assert rules(tmp_path, ROUTE.format(m="cardiffnlp/twitter-roberta-base-sentiment-latest", body=ONE)) == []
    assert rules(tmp_path, ROUTE.format(m="cardiffnlp/twitter-roberta-base-sentiment-latest", body=LOOP)) == ["IT030"]
    assert rules(tmp_path, ROUTE.format(m="intfloat/e5-large-v2", body=ONE)) == ["IT030"]


def test_an_untrained_head_in_a_profiler_is_not_a_prediction(tmp_path):
    """IT041 is silent where the file measures the model's cost: what the random head predicts is not its output."""
    code = (
        "from transformers import AutoModelForSequenceClassification\n"
        'model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")\n'
        "{}out = model(**batch)\n"
    )
    assert rules(tmp_path, code.format("")) == ["IT041"]
    assert rules(tmp_path, code.format("import time\nt0 = time.perf_counter()\n")) == []


PIPE = (
    "from transformers import pipeline\n"
    'chatbot = pipeline("text-generation", model="{}", dtype=torch.bfloat16, device=0)\n'
    'messages = [{{"role": "user", "content": "Do you have mayonnaise recipes?"}}]\n'
    "print(chatbot(messages{})[0]['generated_text'][-1])\n"
)


def test_a_text_generation_pipeline_with_no_length_before_4_52(tmp_path):
    """IT036: no max_new_tokens on a pipeline: 20 tokens counting the prompt before transformers 4.52, 256 new ones
    since; silent when the pins say 4.52+, for GPT-2 (its config sets 50) and a local folder. A conversation handed
    to the pipeline is one input, not a list to batch (IT028 silent)."""
    mistral = "mistralai/Mistral-7B-Instruct-v0.3"
    assert rules(tmp_path, PIPE.format(mistral, "")) == ["IT036"]
    assert rules(tmp_path, PIPE.format(mistral, ", max_new_tokens=256")) == []
    assert rules(tmp_path, PIPE.format(mistral, ""), Target(transformers_min=(4, 52), version_source="x")) == []
    assert rules(tmp_path, PIPE.format("./my-finetune", "")) == []
    gpt2 = PIPE.format("gpt2", "").replace("messages)", "'Once upon a time')")
    assert "IT036" not in rules(tmp_path, gpt2)


def test_a_model_placed_on_the_cpu_by_device_map_stays_there_behind_wrappers(tmp_path):
    """IT001 is silent for device_map="cpu" (fp32 is the CPU's precision) when the model is then handed to a pipeline
    with no device (it reads hf_device_map and leaves the model where it is) and to LlamaIndex's HuggingFaceLLM."""
    code = (
        "from transformers import pipeline\nfrom llama_index.llms.huggingface import HuggingFaceLLM\n"
        'model = AutoModelForCausalLM.from_pretrained("TinyLlama/TinyLlama-1.1B-Chat-v1.0", device_map="{}")\n'
        'tok = AutoTokenizer.from_pretrained("TinyLlama/TinyLlama-1.1B-Chat-v1.0")\n'
        'pipe = pipeline("text-generation", model=model, tokenizer=tok, max_new_tokens=256)\n'
        "llm = HuggingFaceLLM(model=model, tokenizer=tok, max_new_tokens=256)\n"
    )
    assert "IT001" not in rules(tmp_path, code.format("cpu"))
    assert "IT001" in rules(tmp_path, code.format("cuda"))


def test_a_chat_model_behind_llama_index_gets_raw_text_unless_told_its_format(tmp_path):
    """IT013: LlamaIndex's HuggingFaceLLM completes with the text as it is unless is_chat_model=True or a
    completion_to_prompt/query_wrapper_prompt says the format (doctor-real-13 d01)."""
    code = (
        "from llama_index.llms.huggingface import HuggingFaceLLM\n"
        'llm = HuggingFaceLLM(model_name="TinyLlama/TinyLlama-1.1B-Chat-v1.0", max_new_tokens=256{})\n'
        'print(index.as_query_engine(llm=llm).query("What is Stoicism?"))\n'
    )
    assert rules(tmp_path, code.format("")) == ["IT013"]
    assert rules(tmp_path, code.format(", is_chat_model=True")) == []
    assert rules(tmp_path, code.format("").replace("TinyLlama-1.1B-Chat-v1.0", "TinyLlama_v1.1")) == []


def test_the_first_token_of_a_mean_pooled_embedding_model_is_no_sentence_vector(tmp_path):
    """IT026's other side: all-MiniLM and its kin were trained with mean pooling; their [CLS] state is not the
    embedding (doctor-real-13 a11). A CLS-pooled model's first token (BGE) is its embedding: silent."""
    code = (
        "from transformers import AutoModel\n"
        'tok = AutoTokenizer.from_pretrained("{m}")\nmodel = AutoModel.from_pretrained("{m}")\n'
        "with torch.no_grad():\n    out = model(**tok(texts, padding=True, return_tensors='pt'))\n"
        "vecs = out.last_hidden_state[:, 0, :]\n"
    )
    assert rules(tmp_path, code.format(m="sentence-transformers/all-MiniLM-L6-v2")) == ["IT026"]
    assert rules(tmp_path, code.format(m="BAAI/bge-base-en-v1.5")) == []


def test_an_auto_class_with_no_mapping_for_the_checkpoint_raises(tmp_path):
    """IT049 both ways: T5 through AutoModelForCausalLM, a decoder-only model through AutoModelForSeq2SeqLM; BART
    has a causal-LM class (BartForCausalLM), a local folder says nothing."""
    code = "from transformers import {cls}\nmodel = {cls}.from_pretrained({m!r})\n"
    assert rules(tmp_path, code.format(cls="AutoModelForCausalLM", m="google/flan-t5-base")) == ["IT049"]
    assert rules(tmp_path, code.format(cls="AutoModelForSeq2SeqLM", m="Qwen/Qwen2.5-0.5B-Instruct")) == ["IT049"]
    assert rules(tmp_path, code.format(cls="AutoModelForCausalLM", m="facebook/bart-large")) == []
    assert rules(tmp_path, code.format(cls="AutoModelForCausalLM", m="./t5-finetuned")) == []
