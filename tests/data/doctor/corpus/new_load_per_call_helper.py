# modelled on: speech-to-text helpers a web server imports and calls per upload, which build the ASR pipeline inside
# (a minimal shape written for infertune's doctor corpus; not copied code)
import numpy as np
from transformers import pipeline


def transcribe_upload(audio_bytes):
    try:
        asr = pipeline("automatic-speech-recognition", model="openai/whisper-small", device=0)  # expect: IT023
        return asr(np.frombuffer(audio_bytes, dtype=np.float32))["text"]
    except Exception as e:
        return str(e)


def summarize_all(texts):
    out = []
    for t in texts:
        out.append(summarize(t))
    return out


def summarize(text):
    pipe = pipeline("summarization", model="facebook/bart-large-cnn", device=0)  # expect: IT023
    return pipe(text, max_length=120)[0]["summary_text"]  # expect: IT034
