# modelled on: leo848/DEversAI deep-backend/main.py (a bare websockets server)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
import asyncio
import websockets
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")
async def serve_one(sock):
    async for text in sock:
        ids = tk.encode(text, return_tensors="pt").to(lm.device)
        out = lm.generate(ids, max_new_tokens=40)  # expect: IT022
        await sock.send(tk.decode(out[0, ids.shape[1]:]))
async def main():
    async with websockets.serve(serve_one, "0.0.0.0", 8765):
        await asyncio.Future()
asyncio.run(main())
