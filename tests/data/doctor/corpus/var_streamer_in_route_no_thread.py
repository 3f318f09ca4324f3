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
    lm.generate(**enc, streamer=st, max_new_tokens=64)  # expect: IT005,IT011
    return StreamingResponse(st)
