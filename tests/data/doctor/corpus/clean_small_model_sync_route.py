# modelled on: TEMGOUAemmauelle/tes_secu_llm api/server.py (doctor-real-4 dev f12)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# A sync FastAPI route (its thread pool) around a 1.1B chat model: a demo, not a serving design (IT011 silent).
from fastapi import FastAPI
from transformers import AutoModelForCausalLM, AutoTokenizer

api = FastAPI()
small_tok = AutoTokenizer.from_pretrained("TinyLlama/TinyLlama-1.1B-Chat-v1.0")
small = AutoModelForCausalLM.from_pretrained("TinyLlama/TinyLlama-1.1B-Chat-v1.0", device_map="auto", dtype="auto")


@api.post("/generate")
def generate(text: str):
    msgs = [{"role": "user", "content": text}]
    enc = small_tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt").to(small.device)
    out = small.generate(enc, max_new_tokens=200)
    return {"reply": small_tok.decode(out[0, enc.shape[-1]:], skip_special_tokens=True)}
