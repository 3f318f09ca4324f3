# modelled on: kdingn/chat-gemma2-jpn api-gemma2/src/main.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from fastapi import FastAPI
from transformers import pipeline
app = FastAPI()
pipe = pipeline("text-generation", model="google/gemma-2-2b-jpn-it", model_kwargs={"dtype": torch.bfloat16})  # (2B, no GPU named: a CPU choice)
@app.post("/chat")
async def chat(message: str):
    msgs = [{"role": "user", "content": message}]
    out = pipe(msgs, return_full_text=False, max_new_tokens=256)  # expect: IT022
    return {"response": out[0]["generated_text"].strip()}
# (IT011 stays silent on a call IT022 reports: one problem, one finding; issue 32's held-back labels and
# doctor-real-3 e04 say so)
