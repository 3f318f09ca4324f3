# modelled on: pansani/go-streaming-message python/server.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
import asyncio
from threading import Thread
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from transformers import TextIteratorStreamer
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")
tk = AutoTokenizer.from_pretrained("gpt2")
app = FastAPI()
async def stream_words():
    enc = tk(["An increasing sequence: one,"], return_tensors="pt").to(lm.device)
    # GPT-2 continuing a sentence, not a chat: IT017 silent (doctor-real-3 e28, the same repository's model.py)
    st = TextIteratorStreamer(tk)
    opts = {**enc, "streamer": st, "max_new_tokens": 50, "pad_token_id": tk.eos_token_id}
    Thread(target=lm.generate, kwargs=opts).start()
    for piece in st:
        await asyncio.sleep(0.2)
        yield piece + "\n"
@app.get("/")
async def home():
    return StreamingResponse(stream_words(), media_type="text/plain")
# IT011 is silent here since doctor-real-4: every model is demo-sized (gpt2), and the labellers of real scripts
# judged a route around one no serving design (doctor-real-4 f12, doctor-real-3 e05/e07, doctor-real-1 b01/b09/b11)
