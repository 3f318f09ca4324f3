# modelled on: rishab090/TNSF-Agentic-ChatBot server.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype=torch.float16).to("cuda")
enc = tk("Write a haiku", return_tensors="pt")  # expect: IT016
out = lm.generate(**enc, max_new_tokens=30)
print(tk.decode(out[0][enc["input_ids"].shape[1]:]))
