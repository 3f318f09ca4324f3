# modelled on: Sendoh-code/Mini-vLLM baseline.py and DeadArcadiy/ALfaLLM tg_bot.py (doctor-real-1 a18, b06)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline
tk = AutoTokenizer.from_pretrained("mistralai/Mistral-7B-Instruct-v0.2")
lm = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-Instruct-v0.2", dtype="auto", device_map="auto")
asks = ["where is it?", "who are you?"]
batch = [tk("<s>[INST] " + q + " [/INST]", return_tensors="pt").input_ids for q in asks]  # expect: IT025,IT003
for ids in batch:
    print(tk.decode(lm.generate(ids.to(lm.device), max_new_tokens=20)[0, ids.shape[1]:], skip_special_tokens=True))
bare = tk(f"<s>[INST] {asks[0]} [/INST]", return_tensors="pt", add_special_tokens=False)
gen = pipeline("text-generation", model=lm, tokenizer=tk)
said = gen(f"<s>[INST] {asks[1]} [/INST]", max_new_tokens=20, return_full_text=False)  # expect: IT025,IT003
