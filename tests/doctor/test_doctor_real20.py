"""infertune doctor, what doctor-real-20 and -21's development parts taught (cases named in docs/doctor.md). Each
test runs the real rules on a snippet, the silent shape beside the one that must fire."""

from tests.doctor.cases import check_code, rules

ASR = (
    "import librosa\nfrom transformers import Wav2Vec2ForCTC, Wav2Vec2Processor\n"
    'proc = Wav2Vec2Processor.from_pretrained("facebook/wav2vec2-base-960h")\n'
    'model = Wav2Vec2ForCTC.from_pretrained("facebook/wav2vec2-base-960h")\n'
    "{load}\n"
    "values = proc(audio, sampling_rate=16000, return_tensors='pt').input_values\n"
    "print(proc.batch_decode(model(values).logits.argmax(-1)))\n"
)


def test_librosa_default_rate_for_a_16khz_speech_model(tmp_path):
    """IT053: librosa.load without sr resamples to 22050 Hz; a wav2vec2 model hears 16 kHz. Silent with sr given,
    with a resample after the load, for a pipeline given the rate in a dict, and in a file with no speech model."""
    assert "IT053" in rules(tmp_path, ASR.format(load="audio, rate = librosa.load('talk.mp3')"))
    assert "IT053" not in rules(tmp_path, ASR.format(load="audio, rate = librosa.load('talk.mp3', sr=16000)"))
    resampled = "audio, rate = librosa.load('talk.mp3')\naudio = librosa.resample(audio, orig_sr=rate, target_sr=16000)"
    assert "IT053" not in rules(tmp_path, ASR.format(load=resampled))
    piped = (
        "import librosa\nfrom transformers import pipeline\n"
        'asr = pipeline("automatic-speech-recognition", model="openai/whisper-small")\n'
        "audio, rate = librosa.load(path)\n{call}\n"
    )
    assert "IT053" in rules(tmp_path, piped.format(call="print(asr(audio))"))
    assert "IT053" not in rules(tmp_path, piped.format(call='print(asr({"raw": audio, "sampling_rate": rate}))'))
    music = "import librosa\nfrom transformers import pipeline\ny, sr = librosa.load(path)\nprint(y.mean())\n"
    assert "IT053" not in rules(tmp_path, music)


WHISPER = (
    "import sys\nimport librosa\nfrom transformers import WhisperForConditionalGeneration, WhisperProcessor\n"
    'proc = WhisperProcessor.from_pretrained("openai/whisper-small")\n'
    'model = WhisperForConditionalGeneration.from_pretrained("openai/whisper-small")\n'
    "{load}\n"
    "feats = proc(speech, sampling_rate=16000, return_tensors='pt').input_features\n"
    "print(proc.batch_decode(model.generate(feats), skip_special_tokens=True))\n"
)


def test_whisper_generate_on_one_30_second_window_of_a_recording_of_any_length(tmp_path):
    """IT054: a Whisper processor cuts audio to 30 s by default and generate decodes that window. Reported for a
    file named on the command line; silent for a fixed sample file, a load with a duration, a cut, a datasets
    sample, and features asked for untruncated (long-form)."""
    assert "IT054" in rules(tmp_path, WHISPER.format(load="speech, _ = librosa.load(sys.argv[1], sr=16000)"))
    for bounded in (
        "speech, _ = librosa.load('sample.wav', sr=16000)",
        "speech, _ = librosa.load(sys.argv[1], sr=16000, duration=30)",
        "speech, _ = librosa.load(sys.argv[1], sr=16000)\nspeech = speech[: 30 * 16000]",
        "from datasets import load_dataset\nspeech = load_dataset('x', split='validation')[0]['audio']['array']",
    ):
        assert "IT054" not in rules(tmp_path, WHISPER.format(load=bounded)), bounded
    long_form = WHISPER.format(load="speech, _ = librosa.load(sys.argv[1], sr=16000)").replace(
        "return_tensors='pt')", "return_tensors='pt', truncation=False, padding='longest')"
    )
    assert "IT054" not in rules(tmp_path, long_form)


def test_a_file_named_for_the_cpu_runs_there_on_purpose(tmp_path):
    """IT002: a 7B chat model loaded with no device is reported, unless the file's own name says it is the CPU run
    (`run_qwen_cpu.py`, `cpu-infer.py`); a name that only contains the letters (`scpu.py`), or names it in passing (`miss_cpu_model.py`), says nothing."""
    code = (
        'tok = AutoTokenizer.from_pretrained("Qwen/Qwen-7B-Chat")\n'
        'model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen-7B-Chat", dtype="auto")\n'
        'ids = tok("hello", return_tensors="pt").input_ids\nprint(model.generate(ids, max_new_tokens=50))\n'
    )
    assert "IT002" in {f.rule for f in check_code(tmp_path, code, name="run_qwen.py").findings}
    assert "IT002" in {f.rule for f in check_code(tmp_path, code, name="scpu.py").findings}
    assert "IT002" in {f.rule for f in check_code(tmp_path, code, name="miss_cpu_model.py").findings}
    assert "IT002" not in {f.rule for f in check_code(tmp_path, code, name="run_qwen_cpu.py").findings}
    assert "IT002" not in {f.rule for f in check_code(tmp_path, code, name="cpu-infer.py").findings}


def test_trust_remote_code_on_a_pipeline_given_no_task_may_load_the_checkpoints_own_pipeline(tmp_path):
    """IT012: with no task, pipeline() takes the task and its class from the checkpoint's `custom_pipelines` when
    trust_remote_code allows it (kotoba-whisper v2.2's diarizing ASR): silent there; a task given makes the flag
    run nothing transformers needs, so it is reported."""
    code = (
        "from transformers import pipeline\n"
        'pipe = pipeline({task}model="kotoba-tech/kotoba-whisper-v2.2", trust_remote_code=True)\n'
        'print(pipe("talk.mp3", chunk_length_s=15))\n'
    )
    assert "IT012" not in rules(tmp_path, code.format(task=""))
    assert "IT012" in rules(tmp_path, code.format(task='"automatic-speech-recognition", '))


def test_deepseek_coder_is_llama_and_needs_no_repository_code(tmp_path):
    """IT012: DeepSeek-Coder checkpoints are LlamaForCausalLM (native), so the flag is reported; DeepSeek-Coder-V2
    ships its own modelling code, so the flag is needed there."""
    code = (
        "from transformers import AutoModelForCausalLM\n"
        'model = AutoModelForCausalLM.from_pretrained("deepseek-ai/{}", dtype="auto", device_map="auto", '
        "trust_remote_code=True)\n"
    )
    assert "IT012" in rules(tmp_path, code.format("deepseek-coder-6.7b-instruct"))
    assert "IT012" not in rules(tmp_path, code.format("DeepSeek-Coder-V2-Lite-Instruct"))


def test_qwen_vl_code_picks_half_precision_itself(tmp_path):
    """IT001: Qwen-VL's own modelling code (trust_remote_code) sets bf16 or fp16 when no precision is given, as
    Qwen (v1)'s does, a local copy named after it included; a native checkpoint loaded so is reported."""
    code = (
        "from transformers import AutoModelForCausalLM\n"
        'model = AutoModelForCausalLM.from_pretrained("{}", device_map="cuda", trust_remote_code=True).eval()\n'
        "print(model.generate(**inputs, max_new_tokens=20))\n"
    )
    assert "IT001" not in rules(tmp_path, code.format("../Qwen-VL-Chat-7B"))
    assert "IT001" not in rules(tmp_path, code.format("Qwen/Qwen-VL-Chat"))
    assert "IT001" in rules(tmp_path, code.format("meta-llama/Llama-2-7b-chat-hf"))


def test_a_folder_joined_with_os_path_join_names_its_checkpoint(tmp_path):
    """A tokenizer loaded from os.path.join(os.getcwd(), "models", "<folder>") is known by the folder's name: a
    Mistral-Instruct chat template's text encoded again gets a second BOS (IT025); the same with the special tokens
    left out is silent."""
    code = (
        "import os\n"
        'tok = AutoTokenizer.from_pretrained(os.path.join(os.getcwd(), "models", "mistral-7b-instruct-hf"))\n'
        'text = tok.apply_chat_template([{{"role": "user", "content": q}}], tokenize=False)\n'
        'ids = tok.encode(text{}, return_tensors="pt")\n'
    )
    assert "IT025" in rules(tmp_path, code.format(""))
    assert "IT025" not in rules(tmp_path, code.format(", add_special_tokens=False"))


def test_an_async_route_running_a_remote_code_chat_blocks_its_event_loop(tmp_path):
    """IT022: `model.chat(...)` of a remote-code checkpoint (Qwen-VL, ChatGLM, InternLM) runs generate inside it:
    an async route calling it (through a helper of the file) blocks the loop; handed to a thread it does not."""
    code = (
        "from fastapi import FastAPI\nfrom transformers import AutoModelForCausalLM\n"
        'model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen-VL-Chat", device_map="cuda", '
        "trust_remote_code=True).eval()\napp = FastAPI()\n\n"
        "def answer(query):\n    response, _ = model.chat(tok, query=query, history=None)\n    return response\n\n"
        '@app.post("/chat")\nasync def chat(q: str):\n    return {{"text": {}}}\n'
    )
    assert "IT022" in rules(tmp_path, code.format("answer(q)"))
    assert "IT022" not in rules(tmp_path, code.format("await asyncio.to_thread(answer, q)"))


def test_a_qwen2_5_fine_tune_spelled_with_a_hyphen_is_not_qwen_1(tmp_path):
    """IT035: Qwen (v1) ids (Qwen-7B, Qwen-1_8B, Qwen-VL) need their repository's code; a fine-tune named
    "Qwen-2.5-0.5B-..." is Qwen2.5, which transformers implements, so loading it without the flag is fine."""
    code = (
        "from transformers import AutoModelForCausalLM\n"
        'model = AutoModelForCausalLM.from_pretrained("{}", dtype="auto", device_map="auto")\n'
    )
    assert "IT035" not in rules(tmp_path, code.format("tadkt/Qwen-2.5-0.5B-VN"))
    assert "IT035" in rules(tmp_path, code.format("Qwen/Qwen-7B-Chat"))
    assert "IT035" in rules(tmp_path, code.format("Qwen/Qwen-1_8B-Chat"))


def test_a_gguf_only_repository_needs_its_gguf_file(tmp_path):
    """IT046: a `...-GGUF` repository holds .gguf files only: from_pretrained fails without gguf_file=; with it the
    load works; ctransformers' own AutoModelForCausalLM (model_file=) reads such repositories."""
    code = (
        "from transformers import AutoModelForCausalLM\n"
        'model = AutoModelForCausalLM.from_pretrained("TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF"{})\n'
    )
    assert "IT046" in rules(tmp_path, code.format(""))
    assert "IT046" not in rules(tmp_path, code.format(', gguf_file="tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf"'))
    other = code.replace("from transformers import", "from ctransformers import")
    assert "IT046" not in rules(tmp_path, other.format(', model_file="tinyllama.Q4_K_M.gguf", model_type="llama"'))
