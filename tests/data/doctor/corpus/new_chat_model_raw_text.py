# modelled on: ferbcn/llamaFineTune stream_generate.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
name = "meta-llama/Llama-3.2-1B-Instruct"
tk = AutoTokenizer.from_pretrained(name)
lm = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16, device_map="auto")
enc = tk(["Explain gravity in one line."], return_tensors="pt").to(lm.device)  # expect: IT013
out = lm.generate(**enc, max_new_tokens=40)
print(tk.decode(out[0][enc.input_ids.shape[-1]:]))
