# modelled on: issue 32's list (the model id as the default of an environment variable)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import os

from transformers import AutoModelForCausalLM, AutoTokenizer

CKPT = os.environ.get("CKPT", "Qwen/Qwen2.5-3B-Instruct")
tk = AutoTokenizer.from_pretrained(CKPT)
lm = AutoModelForCausalLM.from_pretrained(CKPT, dtype="auto", device_map="auto")
enc = tk("Explain what a hash map is.", return_tensors="pt").to(lm.device)  # expect: IT013
out = lm.generate(**enc, max_new_tokens=64)
print(tk.decode(out[0][enc.input_ids.shape[1] :], skip_special_tokens=True))
