# modelled on: issue 32's list (a model cast to half precision and moved to the GPU after loading)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

NAME = "Qwen/Qwen2.5-7B-Instruct"
tk = AutoTokenizer.from_pretrained(NAME)
lm = AutoModelForCausalLM.from_pretrained(NAME)
lm = lm.half().cuda()
other = AutoModelForCausalLM.from_pretrained(NAME).to("cuda", dtype=torch.bfloat16)
msgs = [{"role": "user", "content": "Name a planet."}]
ids = tk.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt").to(lm.device)
print(tk.decode(lm.generate(ids, max_new_tokens=16)[0][ids.shape[1] :], skip_special_tokens=True))
print(tk.decode(other.generate(ids, max_new_tokens=16)[0][ids.shape[1] :], skip_special_tokens=True))
