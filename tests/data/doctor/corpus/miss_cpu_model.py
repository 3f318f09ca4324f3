# modelled on: ragavkish/a.n.d.r.e.w. model_setup.py (never moved variant)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("EleutherAI/gpt-j-6b")
lm = AutoModelForCausalLM.from_pretrained("EleutherAI/gpt-j-6b", dtype="auto")  # expect: IT002
lm.eval()
enc = tk("hello", return_tensors="pt")
print(tk.decode(lm.generate(**enc, max_new_tokens=10)[0][enc.input_ids.shape[1]:]))
