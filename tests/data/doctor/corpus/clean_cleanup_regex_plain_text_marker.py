# modelled on: issue 32's list (Llama 2's [/INST] is plain text: it survives skip_special_tokens=True, the split works)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import re

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

NAME = "meta-llama/Llama-2-7b-chat-hf"
tk = AutoTokenizer.from_pretrained(NAME)
lm = AutoModelForCausalLM.from_pretrained(NAME, torch_dtype=torch.float16, device_map="auto")
msgs = [{"role": "user", "content": "Summarise the plot of Hamlet."}]
enc = tk.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt").to(lm.device)
out = lm.generate(enc, max_new_tokens=96)
raw = tk.decode(out[0], skip_special_tokens=True)
print(re.split(r"\[/INST\]", raw)[-1].strip())
