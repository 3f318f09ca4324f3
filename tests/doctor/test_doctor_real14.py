"""infertune doctor, what doctor-real-14's development part taught (its cases are named in docs/doctor.md). Each
test runs the real rules on a snippet, the silent shape beside the one that must fire."""

from tests.doctor.cases import rules

PAGE = (
    "import streamlit as st\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
    '@st.cache_resource\ndef load():\n    m = "mistralai/Mistral-7B-v0.1"\n'
    '    return AutoTokenizer.from_pretrained(m), AutoModelForCausalLM.from_pretrained(m, dtype="auto", device_map="auto")\n'
    "tok, model = load()\n"
    'text = st.{box}("{label}")\nif st.button("Generate"):\n'
    '    out = model.generate(**tok(text, return_tensors="pt").to(model.device), max_new_tokens=100)\n'
    "    st.write(tok.decode(out[0], skip_special_tokens=True))\n"
)


def test_a_base_model_continuing_a_typed_prompt_shows_it_with_its_continuation(tmp_path):
    """IT004: a base release's page that continues what the user types prints prompt and continuation, its
    natural output; a box that asks a question makes it a dialogue, and the prompt in front of the reply a leak."""
    assert rules(tmp_path, PAGE.format(box="text_area", label="Enter your prompt here:")) == []
    assert rules(tmp_path, PAGE.format(box="text_input", label="Ask a question")) == ["IT004"]


def test_a_streamer_handed_over_in_a_kwargs_dict_is_where_the_answer_goes(tmp_path):
    """IT042: generate's return value is not the answer when a streamer is among its options, also when they come
    in a **dict; without one, the value thrown away is."""
    code = (
        'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto")\n'
        "streamer = TextIteratorStreamer(tok, skip_prompt=True)\n"
        'opts = dict(**tok(q, return_tensors="pt").to(model.device), {}max_new_tokens=20)\n'
        "def run():\n    model.generate(**opts)\n"
        "Thread(target=run).start()\nfor chunk in streamer:\n    print(chunk)\n"
    )
    assert "IT042" not in rules(tmp_path, code.format("streamer=streamer, "))
    assert "IT042" in rules(tmp_path, code.format(""))


def test_an_answer_taken_out_by_a_call_named_for_it_has_no_prompt_left(tmp_path):
    """IT004: a decode handed to a call named for taking the answer out (alpaca-lora's `prompter.get_response`,
    which splits at its template's response marker) is cut; handed to an unrelated call, it is not."""
    code = (
        'model = AutoModelForCausalLM.from_pretrained("me/llama-7b-alpaca", dtype="auto", device_map="auto")\n'
        "def evaluate(instruction):\n"
        '    ids = tok(prompter.generate_prompt(instruction), return_tensors="pt").input_ids.to(model.device)\n'
        "    out = model.generate(input_ids=ids, max_new_tokens=128)\n"
        "    return prompter.{}(tok.decode(out[0]))\n"
        "gr.Interface(fn=evaluate, inputs='text', outputs='text').launch()\n"
    )
    assert "IT004" not in rules(tmp_path, code.format("get_response"))
    assert "IT004" in rules(tmp_path, code.format("log"))


BRANCHES = (
    "import torch\nfrom peft import PeftModel\n"
    'device = "cuda" if torch.cuda.is_available() else "cpu"\n'
    "def main(base, load_8bit=False):\n"
    '    if device == "cuda":\n'
    "        model = AutoModelForCausalLM.from_pretrained(base, load_in_8bit=load_8bit, torch_dtype=torch.float16, "
    'device_map="auto")\n'
    "    else:\n"
    '        model = AutoModelForCausalLM.from_pretrained(base, device_map={{"": device}})\n'
    '    model = PeftModel.from_pretrained(model, "me/lora")\n'
    "{cast}"
    '    ids = tok("Tell me about alpacas.", return_tensors="pt").input_ids.to(device)\n'
    "    out = model.generate(input_ids=ids, max_new_tokens=128)\n"
    "    return tok.decode(out[0][ids.shape[1]:])\n"
)


def test_the_cpu_branch_of_a_device_test_is_read_as_the_cpu(tmp_path):
    """alpaca-lora's generate.py: in the `else:` of `if device == "cuda":` the device is "cpu", so the fp32 load
    there is the CPU's precision (no IT001); a `.half()` after the branches meets that CPU model (IT031 on the cast,
    not IT020: one problem, one finding). Both branches' models reach the read after them."""
    assert rules(tmp_path, BRANCHES.format(cast="")) == []
    assert rules(tmp_path, BRANCHES.format(cast="    if not load_8bit:\n        model.half()\n")) == ["IT031"]


def test_a_codegpt_fine_tune_is_gpt2_and_needs_no_remote_code(tmp_path):
    """IT012: Microsoft's CodeGPT checkpoints (and fine-tunes named after them) are GPT-2, which transformers runs
    itself."""
    code = 'model = AutoModelForCausalLM.from_pretrained("{}", trust_remote_code=True, dtype="auto")\n'
    assert "IT012" in rules(tmp_path, code.format("someone/codegpt-small-sft"))
    assert "IT012" not in rules(tmp_path, code.format("someone/internlm2-chat-7b"))


def test_a_form_whose_submit_is_never_read_generates_on_every_rerun(tmp_path):
    """IT050: the submit button's value is bound and never tested, so the generation under the form runs at each
    rerun; testing it gates the generation."""
    code = (
        "import streamlit as st\nfrom transformers import pipeline\n"
        '@st.cache_resource\ndef load():\n    return pipeline("text-generation", model="gpt2")\npipe = load()\n'
        "def answer(text):\n    out = pipe(text, max_new_tokens=64)\n    st.info(out[0]['generated_text'])\n"
        "with st.form('f'):\n    text = st.text_area('Enter text:')\n    submitted = st.form_submit_button('Submit')\n"
        "{}"
    )
    assert "IT050" in rules(tmp_path, code.format("    answer(text)\n"))
    assert "IT050" not in rules(tmp_path, code.format("    if submitted:\n        answer(text)\n"))


def test_generate_fed_its_own_output_one_token_at_a_time_is_quadratic(tmp_path):
    """IT027: a loop that calls generate for one more token (max_length = the input's length + 1) and feeds its
    output back as the next input prefills the whole sequence each step; one call with many tokens is fine."""
    code = (
        'model = AutoModelForCausalLM.from_pretrained("m", dtype="auto", device_map="auto")\n'
        "def decode(input_ids, steps):\n"
        "    for _ in range(steps):\n"
        "        out = model.generate(input_ids, max_length=input_ids.shape[1] + {}, return_dict_in_generate=True)\n"
        "        input_ids = out.sequences[0].unsqueeze(0)\n"
        "    return input_ids\n"
    )
    assert "IT027" in rules(tmp_path, code.format(1))
    assert "IT027" not in rules(tmp_path, code.format(256))


def test_a_helper_that_loads_a_model_and_runs_a_pipeline_around_it_per_call(tmp_path):
    """IT023: the function loads the weights, wraps them in a pipeline and runs it on its argument: every call
    loads again. The same pipeline built once outside is silent."""
    load = (
        '    model = AutoModelForSpeechSeq2Seq.from_pretrained("distil-whisper/distil-large-v3", dtype="auto")\n'
        '    pipe = pipeline("automatic-speech-recognition", model=model, device=0)\n'
    )
    code = "from transformers import AutoModelForSpeechSeq2Seq, pipeline\ndef transcribe(link):\n{}    return pipe(link)['text']\n"
    assert rules(tmp_path, code.format(load)) == ["IT023"]
    outside = code.format("").replace("def transcribe", load.replace("    ", "") + "def transcribe")
    assert rules(tmp_path, outside) == []


def test_a_console_loop_over_a_base_model_is_a_dialogue_not_a_prompt_box(tmp_path):
    """IT004: `input()` in a loop is a console's turn (doctor-real-16 d13, a base Qwen1.5 "你说：" loop): the reply
    printed with the user's words in front is a leak, unlike a page's prompt box."""
    code = (
        'tok = AutoTokenizer.from_pretrained("Qwen/Qwen1.5-0.5B")\n'
        'model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen1.5-0.5B")\n'
        "while True:\n"
        '    inputs = tok(input("> "), return_tensors="pt")\n'
        "    out = model.generate(**inputs, max_new_tokens=128)\n"
        "    print(tok.decode(out[0], skip_special_tokens=True))\n"
    )
    assert "IT004" in rules(tmp_path, code)
