# modelled on: issue 32's list (a decode with skip_special_tokens=True, then a cleanup regex for template markers)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import re

from transformers import AutoModelForCausalLM, AutoTokenizer

NAME = "Qwen/Qwen2.5-1.5B-Instruct"
tk = AutoTokenizer.from_pretrained(NAME)
lm = AutoModelForCausalLM.from_pretrained(NAME, dtype="auto", device_map="auto")
msgs = [{"role": "user", "content": "Name three rivers."}]
enc = tk.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt").to(lm.device)
out = lm.generate(enc, max_new_tokens=64)
full = tk.decode(out[0], skip_special_tokens=True)  # expect: IT004
print(re.sub(r"^.*<\|im_start\|>assistant\n", "", full, flags=re.S))
