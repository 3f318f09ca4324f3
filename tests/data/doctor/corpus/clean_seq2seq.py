# modelled on: ThaiLe1220/story_telling finetuning_llm.py (encoder-decoder import)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import AutoModelForSeq2SeqLM
tk = AutoTokenizer.from_pretrained("google/flan-t5-base")
t5 = AutoModelForSeq2SeqLM.from_pretrained("google/flan-t5-base", device_map="auto")
enc = tk("translate English to German: hello", return_tensors="pt").to(t5.device)
out = t5.generate(**enc, max_length=40)
print(tk.decode(out[0], skip_special_tokens=True))
