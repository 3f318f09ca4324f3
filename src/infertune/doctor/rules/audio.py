"""Speech input: IT053, audio loaded at librosa's default 22050 Hz for a model that hears 16 kHz; IT054, a Whisper
generate given one 30-second window of a recording of any length."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.flow import Unpack
from infertune.doctor.nodes import IGNORECASE, const, dotted, has_star_kwargs, kw, lazy_compile, method, receiver
from infertune.doctor.script import Script

# speech models whose feature extractors are built for 16 kHz audio (Whisper, wav2vec2 and its kin, SpeechT5,
# SeamlessM4T); the ASR and audio-classification pipelines' defaults are wav2vec2 checkpoints
SPEECH_16K = lazy_compile(
    r"whisper|wav2vec2|hubert|wavlm|speecht5|seamless|data2vec-?audio|unispeech|(^|[-_/])mms-", IGNORECASE
)
SPEECH_TASKS = {"automatic-speech-recognition", "audio-classification"}
RESAMPLES = lazy_compile(r"resample", IGNORECASE)  # librosa.resample, torchaudio's Resample, a helper of that name
LIBROSA_DEFAULT_RATE = 22050  # librosa.load(path, *, sr=22050, ...): it resamples to this unless told otherwise


def _speech_16k(s: Script) -> bool:
    """The file runs a 16 kHz speech model: named by a class or a model id, or an ASR/audio pipeline task."""
    if any(SPEECH_16K.search(i) for i in s.model_ids()):
        return True
    names = (n.id if isinstance(n, ast.Name) else n.attr for n in s.nodes if isinstance(n, ast.Name | ast.Attribute))
    return any(SPEECH_16K.search(n) for n in names) or any(
        isinstance(n, ast.Constant) and n.value in SPEECH_TASKS for n in s.nodes
    )


def _rate_handed_on(s: Script) -> bool:
    """A {"raw": audio, "sampling_rate": sr} input: the pipeline resamples it to its model's rate itself."""
    return any(
        isinstance(n, ast.Dict) and any(const(k) == "sampling_rate" for k in n.keys if k is not None) for n in s.nodes
    )


def librosa_default_rate(s: Script):
    if "librosa" not in s.source or not _speech_16k(s) or RESAMPLES.search(s.source) or _rate_handed_on(s):
        return
    for c in s.calls:
        if dotted(c.func) == "librosa.load" and len(c.args) < 2 and kw(c, "sr") is None and not has_star_kwargs(c):
            yield (
                c,
                f"librosa.load without sr= resamples the audio to {LIBROSA_DEFAULT_RATE} Hz, and this speech model "
                "hears 16 kHz: told 16000 its features are of slowed-down speech, told the real rate its feature "
                "extractor raises; pass sr=16000",
            )


# --- IT054 ---------------------------------------------------------------------------------------------------------

PROCESSORS = lazy_compile(r"Processor|FeatureExtractor")
AUDIO_FROM_FILE = {"librosa.load", "sf.read", "soundfile.read", "torchaudio.load", "whisper.load_audio"}


def _feature_calls(s: Script, g: ast.Call) -> list[ast.Call]:
    """Calls of a loaded processor or feature extractor (`processor(audio, ...)`, `processor.feature_extractor(...)`)
    whose features reach the generate call g."""
    out = []
    for c in s.calls:
        holder = c.func.value if isinstance(c.func, ast.Attribute) and c.func.attr == "feature_extractor" else c.func
        if not c.args or not isinstance(holder, ast.Name | ast.Attribute):
            continue
        loads = [o for o in s.origins(holder) if isinstance(o, ast.Call) and method(o) == "from_pretrained"]
        if any(PROCESSORS.search(dotted(receiver(o))) for o in loads) and g in s.sinks_of(c):
            out.append(c)  # (where its features flow, the costlier question, asked of processor calls only)
    return out


def _sources(s: Script, audio: ast.expr) -> list[ast.AST]:
    """The audio, where it comes from, and the call a tuple unpacks it from (`y, sr = librosa.load(p)`, which
    origins() leaves alone: a call's result is no tuple it can read)."""
    out = [audio, *(o for o in s.origins(audio) if isinstance(o, ast.AST))]
    for n in list(out):
        if isinstance(n, ast.Name) and n.id in s.assigns:
            out += [v.value for v in s.reaching(n.id, n) if isinstance(v, Unpack) and isinstance(v.value, ast.AST)]
    return out


def _bounded(s: Script, audio: ast.expr) -> bool:
    """Audio of a known, short length: cut somewhere ([:30 * sr]), loaded with a duration, a fixed sample file the
    author knows (a literal path), or a data set's sample (LibriSpeech's dummy clips are seconds long; a `datasets`
    Audio column decodes to `sample["audio"]["array"]`: an utterance, doctor-real-5 q22)."""
    if s.imports("datasets") or any(dotted(c.func).endswith("load_dataset") for c in s.calls):
        return True
    for o in _sources(s, audio):
        if any(isinstance(n, ast.Slice) or const(n) == "array" for n in ast.walk(o)):
            return True
        loads = [n for n in ast.walk(o) if isinstance(n, ast.Call) and dotted(n.func) in AUDIO_FROM_FILE]
        if any(kw(n, "duration") is not None or (n.args and isinstance(const(n.args[0]), str)) for n in loads):
            return True
    return False


def whisper_window(s: Script):
    for g in s.generates:
        loads = s.models_of(receiver(g))
        if not any("whisper" in (s.model_id(m) or "").lower() or "Whisper" in s.model_class(m) for m in loads):
            continue
        for c in _feature_calls(s, g):
            if const(kw(c, "truncation")) is False or has_star_kwargs(c) or _bounded(s, c.args[0]):
                continue
            yield (
                c,
                "the Whisper feature extractor keeps only the first 30 s of this audio (truncation=True by default) "
                "and generate decodes that one window: the rest of a longer recording is dropped without a word; "
                "pass truncation=False, padding='longest', return_attention_mask=True (long-form generate, "
                "transformers 4.37+), or use the ASR pipeline with chunk_length_s=30",
            )
            break
