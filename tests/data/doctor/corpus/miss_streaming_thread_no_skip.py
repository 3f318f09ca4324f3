# modelled on: pansani/go-streaming-message model.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from threading import Thread
from transformers import TextIteratorStreamer
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")
enc = tk(["An increasing sequence: one,"], return_tensors="pt").to(lm.device)
# GPT-2 continuing a sentence: the prompt streamed back first is the demo's own output (IT017 silent, as IT004;
# doctor-real-3 e28, this very script, labelled so blind)
st = TextIteratorStreamer(tk)
kwargs = dict(enc, streamer=st, max_new_tokens=20)
Thread(target=lm.generate, kwargs=kwargs).start()
for piece in st:
    print(piece)
