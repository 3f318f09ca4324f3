# modelled on: endpoints that tokenize one prompt with padding=True for a GPT-2-family model (nothing is padded)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from flask import Flask, request
from transformers import AutoModelForCausalLM, AutoTokenizer

srv = Flask(__name__)
tk = AutoTokenizer.from_pretrained("distilgpt2")
tk.pad_token = tk.eos_token
lm = AutoModelForCausalLM.from_pretrained("distilgpt2")


@srv.post("/continue")
def cont():
    text = request.json["text"].strip()
    enc = tk(text, return_tensors="pt", padding=True, truncation=True, max_length=64)
    out = lm.generate(**enc, max_new_tokens=30, pad_token_id=tk.eos_token_id)
    return {"text": tk.decode(out[0], skip_special_tokens=True)}
