# modelled on: ferbcn/llamaFineTune stream_generate.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import TextStreamer
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")
enc = tk(["An increasing sequence: one,"], return_tensors="pt").to(lm.device)
# GPT-2 continuing a sentence: the prompt streamed back first is the demo's own output (IT017 silent, as IT004;
# doctor-real-3 e28, this very script, labelled so blind)
st = TextStreamer(tk)
lm.generate(**enc, streamer=st, max_new_tokens=20)
