# modelled on: yuyatinnefeld/llama-2 src/gpt.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype=torch.float32, device_map="auto")
enc = tk(["Today is"], return_tensors="pt").to(lm.device)
res = lm.generate(**enc, max_new_tokens=5, return_dict_in_generate=True, output_scores=True)
# silent on IT004 since h-doc2: a small base model's continuation shown whole is a completion demo's expected output
print(tk.decode(res.sequences[0], skip_special_tokens=True))
