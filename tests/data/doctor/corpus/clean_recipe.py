# modelled on: Grant-Bellotti/llm-mitre-commands old/app.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
mid = "meta-llama/Llama-3.1-8B-Instruct"
tk = AutoTokenizer.from_pretrained(mid)
lm = AutoModelForCausalLM.from_pretrained(mid, device_map="auto", dtype=torch.bfloat16)
msgs = [{"role": "user", "content": "Who are you?"}]
enc = tk.apply_chat_template(msgs, add_generation_prompt=True, return_dict=True, return_tensors="pt").to(lm.device)
out = lm.generate(**enc, max_new_tokens=40, do_sample=True)
print(tk.decode(out[0][enc["input_ids"].shape[-1]:], skip_special_tokens=True))
