# modelled on: tally-project/tally tests/run-torch-compile.py (applied to an LLM)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")
lm = torch.compile(lm)  # expect: IT006
enc = tk("hi", return_tensors="pt").to("cuda")
out = lm.generate(**enc, max_new_tokens=20)
print(tk.decode(out[0][enc.input_ids.shape[1]:]))
