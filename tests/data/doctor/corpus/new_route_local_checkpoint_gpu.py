# modelled on: minhtran146/llm_guardrail llm_guardrail/modeling/generator/src/app.py (a GPU backend, one generate
# per POST, other services call it)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import os

from fastapi import FastAPI
from transformers import AutoModelForCausalLM, AutoTokenizer

PATH = os.environ["CKPT_DIR"]
lm = AutoModelForCausalLM.from_pretrained(PATH, dtype="auto", device_map="auto")
tk = AutoTokenizer.from_pretrained(PATH)
api = FastAPI()


@api.post("/answer")
def answer(question: str):
    msgs = [{"role": "user", "content": question}]
    text = tk.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    enc = tk([text], return_tensors="pt").to(lm.device)
    out = lm.generate(**enc, max_new_tokens=128)  # expect: IT011
    return {"answer": tk.decode(out[0][enc.input_ids.shape[1] :], skip_special_tokens=True)}
