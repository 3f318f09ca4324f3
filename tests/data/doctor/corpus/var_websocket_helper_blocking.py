# modelled on: MinseouKim/Nullbrain-backend backend/app/api/ws.py (websocket route)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from fastapi import FastAPI, WebSocket
app = FastAPI()
tk = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-1.5B-Instruct")
lm = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B-Instruct", dtype="auto", device_map="auto")
def answer(msgs):
    text = tk.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    enc = tk([text], return_tensors="pt").to(lm.device)
    ids = lm.generate(**enc, max_new_tokens=512)
    ids = [o[len(i):] for i, o in zip(enc.input_ids, ids)]
    return tk.batch_decode(ids, skip_special_tokens=True)[0]
@app.websocket("/ws")
async def ws(sock: WebSocket):
    await sock.accept()
    while True:
        data = await sock.receive_json()
        await sock.send_text(answer(data["messages"]))  # expect: IT022
# (IT011 stays silent on a call IT022 reports: one problem, one finding; issue 32's held-back labels and
# doctor-real-3 e04 say so)
