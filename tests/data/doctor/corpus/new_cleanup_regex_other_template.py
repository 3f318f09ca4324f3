# modelled on: issue 32's list (a cleanup regex written for Llama 2's [/INST] on a Llama 3 model's text)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import re

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

NAME = "meta-llama/Meta-Llama-3-8B-Instruct"
tk = AutoTokenizer.from_pretrained(NAME)
lm = AutoModelForCausalLM.from_pretrained(NAME, torch_dtype=torch.bfloat16, device_map="auto")
msgs = [{"role": "user", "content": "Summarise the plot of Hamlet."}]
enc = tk.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt").to(lm.device)
out = lm.generate(enc, max_new_tokens=96)
raw = tk.decode(out[0])  # expect: IT004
found = re.search(r"\[/INST\](.*)", raw, re.S)
print(found.group(1) if found else raw)
