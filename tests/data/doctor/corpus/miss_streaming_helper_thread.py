# modelled on: joshua-paperspace/RAG-App-Example main.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from threading import Thread
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from transformers import TextIteratorStreamer
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")
tk = AutoTokenizer.from_pretrained("gpt2")
app = FastAPI()
async def produce(text):
    enc = tk([text], return_tensors="pt").to(lm.device)
    st = TextIteratorStreamer(tk, skip_prompt=True)
    Thread(target=lm.generate, kwargs=dict(enc, streamer=st, max_new_tokens=50)).start()
    for piece in st:  # expect: IT022
        yield piece
@app.get("/")
async def root(q: str):
    return StreamingResponse(produce(q))
# IT011 is silent here since doctor-real-4: every model is demo-sized (gpt2), and the labellers of real scripts
# judged a route around one no serving design (doctor-real-4 f12, doctor-real-3 e05/e07, doctor-real-1 b01/b09/b11)
# IT022: the async generator reads the streamer on the event loop, token by token (doctor-real-8 v14 line 101,
# labelled so; found since the eighth session).
