# modelled on: PokTanakrit/frontwebai src/Model/Model_speech_to_text.py (a route that builds its pipeline per call)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from fastapi import FastAPI
from transformers import pipeline

app = FastAPI()


@app.post("/transcribe")
def transcribe(path: str):
    asr = pipeline("automatic-speech-recognition", model="openai/whisper-small")  # expect: IT023
    return {"text": asr(path)["text"]}  # expect: IT011
