# modelled on: GamKon/chat-bot-game bot_ai.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("mistralai/Mistral-7B-Instruct-v0.1")
lm = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-Instruct-v0.1", dtype="auto", device_map="auto")
stop = tk("User:", add_special_tokens=False).input_ids
def ask(q):
    text = "[INST] " + q + " [/INST]"  # expect: IT003
    enc = tk(text, return_tensors="pt").to(lm.device)
    out = lm.generate(**enc, max_new_tokens=64, eos_token_id=stop)
    budget = len(tk("<|im_start|>user " + q).input_ids)
    return tk.decode(out[0][enc.input_ids.shape[1]:]), budget
