# modelled on: pansani/go-streaming-message model.py (skip_prompt fixed)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from threading import Thread
from transformers import TextIteratorStreamer
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")
enc = tk(["An increasing sequence: one,"], return_tensors="pt").to(lm.device)
st = TextIteratorStreamer(tk, skip_prompt=True)
Thread(target=lm.generate, kwargs=dict(enc, streamer=st, max_new_tokens=20)).start()
for piece in st:
    print(piece, end="")
