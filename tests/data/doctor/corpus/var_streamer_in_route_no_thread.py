# modelled on: ferbcn/llamaFineTune stream_generate.py (served without a thread)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from transformers import TextIteratorStreamer
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")
app = FastAPI()
@app.get("/stream")
def stream(q: str):
    enc = tk(q, return_tensors="pt").to(lm.device)
    st = TextIteratorStreamer(tk, skip_prompt=True)
    lm.generate(**enc, streamer=st, max_new_tokens=64)  # expect: IT005
    return StreamingResponse(st)
# IT011 is silent here since doctor-real-4: every model is demo-sized (gpt2), and the labellers of real scripts
# judged a route around one no serving design (doctor-real-4 f12, doctor-real-3 e05/e07, doctor-real-1 b01/b09/b11)
