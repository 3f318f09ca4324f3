# modelled on: ModelCloud/GPTQModel examples/quantization/transformers_usage.py (device_map='cpu')
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("facebook/opt-125m")
lm = AutoModelForCausalLM.from_pretrained("facebook/opt-125m", dtype=torch.float32, device_map="cpu")
enc = tk("auto-gptq is", return_tensors="pt")
print(tk.decode(lm.generate(**enc, max_new_tokens=10)[0][enc.input_ids.shape[1]:]))
