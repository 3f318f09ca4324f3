# modelled on: talamit999/Quantum_Error_Correcting LLM_load.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("google/gemma-2b")
lm = AutoModelForCausalLM.from_pretrained("google/gemma-2b", dtype="auto", device_map="auto")
lm.generation_config.cache_implementation = "static"
lm.forward = torch.compile(lm.forward, mode="reduce-overhead", fullgraph=True)
enc = tk("The theory of special relativity states ", return_tensors="pt").to(lm.device)
out = lm.generate(**enc, max_new_tokens=32)
print(tk.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True))
