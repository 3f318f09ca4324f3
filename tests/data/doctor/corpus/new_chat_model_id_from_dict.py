# modelled on: issue 32's list (the model id read from a constant: an entry of a dict of model names)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

CHOICES = {"fast": "Qwen/Qwen2.5-1.5B-Instruct", "good": "Qwen/Qwen2.5-7B-Instruct"}
picked = CHOICES["fast"]
tk = AutoTokenizer.from_pretrained(picked)
lm = AutoModelForCausalLM.from_pretrained(picked, dtype="auto", device_map="auto")
enc = tk("Translate into German: good morning", return_tensors="pt").to(lm.device)  # expect: IT013
out = lm.generate(**enc, max_new_tokens=32)
print(tk.decode(out[0][enc.input_ids.shape[1] :], skip_special_tokens=True))
