# modelled on: Mikeblackbelt/ScholarshipSorter llama_test2.py (one-device map, then .to)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("meta-llama/Llama-3.1-8B")
lm = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", dtype=torch.float16, device_map={"": 0})
lm.to("cuda")
enc = tk("Plants create energy through", return_tensors="pt").to("cuda")
print(tk.decode(lm.generate(**enc, max_new_tokens=30)[0][enc.input_ids.shape[1]:], skip_special_tokens=True))
