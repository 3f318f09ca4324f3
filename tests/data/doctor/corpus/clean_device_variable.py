# modelled on: ragavkish/a.n.d.r.e.w. model_setup.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
device = "cuda" if torch.cuda.is_available() else "cpu"
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto").to(device)
lm.eval()
enc = tk("hello", return_tensors="pt").to(device)
print(tk.decode(lm.generate(**enc, max_new_tokens=10)[0][enc.input_ids.shape[1]:]))
