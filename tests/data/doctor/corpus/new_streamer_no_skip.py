# modelled on: ferbcn/llamaFineTune stream_generate.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import TextStreamer
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")
enc = tk(["An increasing sequence: one,"], return_tensors="pt").to(lm.device)
st = TextStreamer(tk)  # expect: IT017
lm.generate(**enc, streamer=st, max_new_tokens=20)
