# modelled on: https://github.com/huggingface/transformers/issues/31839 (greedy chosen on purpose)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
name = "meta-llama/Llama-2-7b-chat-hf"
tk = AutoTokenizer.from_pretrained(name)
lm = AutoModelForCausalLM.from_pretrained(name, load_in_4bit=True)  # expect: IT008 (load_in_4bit=True computes in fp32)
msgs = [{"role": "user", "content": "2+2?"}]
ids = tk.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt").to(lm.device)
out = lm.generate(ids, do_sample=False, temperature=0, max_new_tokens=16)
print(tk.decode(out[0][ids.shape[1]:], skip_special_tokens=True))
