# modelled on: rishab090/TNSF-Agentic-ChatBot server.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from fastapi import FastAPI
from pydantic import BaseModel
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")
app = FastAPI()
class Req(BaseModel):
    prompt: str
@app.post("/generate")
async def handle(r: Req):
    enc = tk(r.prompt, return_tensors="pt").to(lm.device)
    out = lm.generate(**enc, max_new_tokens=50)  # expect: IT022
    return {"text": tk.decode(out[0][enc.input_ids.shape[1]:], skip_special_tokens=True)}
# (IT011 stays silent on a call IT022 reports: one problem, one finding; issue 32's held-back labels and
# doctor-real-3 e04 say so)
