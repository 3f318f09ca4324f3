# modelled on: aibot558558-cyber/web-agent app.py (log and clean-up strings)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
import logging
name = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
tk = AutoTokenizer.from_pretrained(name)
lm = AutoModelForCausalLM.from_pretrained(name, dtype="auto", device_map="auto")
history = []
def reply(msg):
    logging.info("User: %s", msg)
    msgs = [{"role": "user", "content": msg}]
    ids = tk.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt").to(lm.device)
    out = lm.generate(ids, max_new_tokens=128)
    text = tk.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    history.append(f"User: {msg}\nAssistant: {text}")
    return text.replace("Assistant:", "").strip()
