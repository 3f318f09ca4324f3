# modelled on: BBjie/HR_ChatBot config.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
name = "Qwen/Qwen2.5-1.5B-Instruct"
tk = AutoTokenizer.from_pretrained(name)
lm = AutoModelForCausalLM.from_pretrained(name, dtype="auto", device_map="auto")
ids = tk.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True,
                             return_tensors="pt").to(lm.device)
out = lm.generate(ids, max_new_tokens=64, presence_penalty=1.0, stop=["\n\n"])  # expect: IT019
print(tk.decode(out[0][ids.shape[1]:]))
