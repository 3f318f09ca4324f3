# modelled on: batch scripts whose main() or a load_model() helper builds the pipeline once, and a try/except fallback
# (a minimal shape written for infertune's doctor corpus; not copied code)
import sys

from transformers import pipeline


def load_model(name):
    pipe = pipeline("summarization", model=name, device=0)
    return pipe


def run(texts):
    pipe = pipeline("summarization", model="facebook/bart-large-cnn", device=0)
    return [pipe(t, max_length=120, truncation=True)[0]["summary_text"] for t in texts]


def transcribe(audio):
    try:
        asr = pipeline("automatic-speech-recognition", model="openai/whisper-large-v3", device=0, torch_dtype="auto")
    except RuntimeError:
        asr = pipeline("automatic-speech-recognition", model="openai/whisper-small", device=0)
    return asr(audio)["text"]


if __name__ == "__main__":
    print(run(sys.argv[1:]))
    print(transcribe(sys.argv[1]))
