# modelled on: Q&A helpers and bots that return a base model's decoded output to whoever asked
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

lm = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-v0.1", dtype=torch.bfloat16, device_map="auto")
tk = AutoTokenizer.from_pretrained("mistralai/Mistral-7B-v0.1")


def answer_question(question):
    enc = tk(question, return_tensors="pt").to(lm.device)
    seq = lm.generate(**enc, max_new_tokens=80)
    return tk.decode(seq[0], skip_special_tokens=True)  # expect: IT004


print(answer_question("Why is the sky blue?"))
