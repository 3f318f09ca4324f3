# modelled on: zoezou9/rag_optimize runLLM.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
name = "meta-llama/Llama-2-13b-chat-hf"
tk = AutoTokenizer.from_pretrained(name)
lm = AutoModelForCausalLM.from_pretrained(name).to("cuda")  # expect: IT001
msgs = [{"role": "user", "content": "Tell me about foxes."}]
ids = tk.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt").to("cuda")
out = lm.generate(ids, max_new_tokens=128)
print(tk.decode(out[0][ids.shape[1]:], skip_special_tokens=True))
