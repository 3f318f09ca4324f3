# modelled on: scottsus/Perpetual (apply_chat_template without generation prompt)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
name = "mistralai/Mistral-7B-Instruct-v0.2"
tk = AutoTokenizer.from_pretrained(name)
lm = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16, device_map="auto")
chat = [{"role": "user", "content": "Name three rivers"}]
text = tk.apply_chat_template(chat, tokenize=False)  # (Mistral's template ends the turn with [/INST]: no IT018)
enc = tk(text, return_tensors="pt").to("cuda")  # expect: IT025
out = lm.generate(**enc, max_new_tokens=64)
print(tk.decode(out[0][enc.input_ids.shape[1]:], skip_special_tokens=True))
