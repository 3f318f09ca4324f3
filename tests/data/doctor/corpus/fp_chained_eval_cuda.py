# modelled on: liusong1222/AngelSlim deploy/offline.py (chained placement variant)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
m = AutoModelForCausalLM.from_pretrained("gpt2", dtype=torch.float16).eval().cuda()
tk = AutoTokenizer.from_pretrained("gpt2")
enc = tk("Hello, my name is", return_tensors="pt").to("cuda")
out = m.generate(**enc, max_new_tokens=20)
print(tk.decode(out[0][enc.input_ids.shape[1]:]))
