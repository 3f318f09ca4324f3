# modelled on: priscy82/Boring app.py (a "chat" route on a tiny base model on the CPU: the reply repeats the query)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from fastapi import FastAPI
from transformers import AutoModelForCausalLM, AutoTokenizer

api = FastAPI()
tk = AutoTokenizer.from_pretrained("sshleifer/tiny-gpt2")
lm = AutoModelForCausalLM.from_pretrained("sshleifer/tiny-gpt2")


@api.get("/talk")
def chat_reply(q: str):
    enc = tk(q, return_tensors="pt")
    out = lm.generate(**enc, max_new_tokens=30, pad_token_id=tk.eos_token_id)
    return {"reply": tk.decode(out[0], skip_special_tokens=True)}  # expect: IT004
