# modelled on: kdingn/chat-gemma2-jpn api-gemma2/src/main.py (offloaded variant)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
import asyncio
from fastapi import FastAPI
tk = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-7B-Instruct")
lm = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B-Instruct", dtype="auto", device_map="auto")
app = FastAPI()
def answer(msg):
    ids = tk.apply_chat_template([{"role": "user", "content": msg}], add_generation_prompt=True,
                                 return_tensors="pt").to(lm.device)
    out = lm.generate(ids, max_new_tokens=64)
    return tk.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
@app.post("/chat")
async def chat(msg: str):
    return {"text": await asyncio.to_thread(answer, msg)}  # expect: IT011
