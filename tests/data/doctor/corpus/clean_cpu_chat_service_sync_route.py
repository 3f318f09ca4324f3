# modelled on: small FastAPI services that run a sub-2B chat model on the CPU, nothing naming a GPU
# (a minimal shape written for infertune's doctor corpus; not copied code)
from fastapi import FastAPI
from transformers import AutoModelForCausalLM, AutoTokenizer

api = FastAPI()
ckpt = "Qwen/Qwen2.5-0.5B-Instruct"
lm = AutoModelForCausalLM.from_pretrained(ckpt)
tk = AutoTokenizer.from_pretrained(ckpt)


@api.post("/reply")
def reply(body: dict):
    msgs = [{"role": "user", "content": body["text"]}]
    ids = tk.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt")
    out = lm.generate(ids, max_new_tokens=64)
    return {"reply": tk.decode(out[0, ids.shape[1] :], skip_special_tokens=True)}
