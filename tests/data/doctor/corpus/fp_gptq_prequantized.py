# modelled on: ModelCloud/GPTQModel examples/inference/run_transformers.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
repo = "TheBloke/TinyLlama-1.1B-Chat-v0.3-GPTQ"
t = AutoTokenizer.from_pretrained(repo)
qm = AutoModelForCausalLM.from_pretrained(repo)
# a fixed sentence to finish, run once at module level: a smoke test of the chat checkpoint, not a chat (the
# doctor-real-3 labellers, blind, on three such probes: e15, e16, e21); IT013 stays silent
x = t("gptq is", return_tensors="pt").to(qm.device)
y = qm.generate(**x, max_new_tokens=20)
print(t.decode(y[0, x["input_ids"].shape[1]:]))
