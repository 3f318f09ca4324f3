# modelled on: tinghui8576/GVirtuS examples/fastapi-qwen3/model_server.py (a route that clocks one generate)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import time

import torch
from fastapi import FastAPI
from transformers import AutoModelForCausalLM, AutoTokenizer

NAME = "Qwen/Qwen3-8B"
tk = AutoTokenizer.from_pretrained(NAME)
lm = AutoModelForCausalLM.from_pretrained(NAME, dtype=torch.bfloat16, device_map="auto")
api = FastAPI()


@api.post("/bench")
def bench(text: str):
    msgs = [{"role": "user", "content": text}]
    prompt = tk.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    enc = tk([prompt], return_tensors="pt").to(lm.device)
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = lm.generate(**enc, max_new_tokens=16, do_sample=False)
    took = time.perf_counter() - t0
    return {"text": tk.decode(out[0][enc.input_ids.shape[1] :], skip_special_tokens=True), "seconds": took}
