# modelled on: huggingface/huggingface-llama-recipes llama_8bit_bnb.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import BitsAndBytesConfig
mid = "meta-llama/Llama-3.1-8B-Instruct"
q8 = BitsAndBytesConfig(load_in_8bit=True)
lm = AutoModelForCausalLM.from_pretrained(mid, quantization_config=q8)
tk = AutoTokenizer.from_pretrained(mid)
ids = tk.apply_chat_template([{"role": "user", "content": "dinner?"}], add_generation_prompt=True,
                             return_tensors="pt").to("cuda")
res = lm.generate(ids, max_new_tokens=16)
print(tk.decode(res[0][ids.shape[-1]:], skip_special_tokens=True))
