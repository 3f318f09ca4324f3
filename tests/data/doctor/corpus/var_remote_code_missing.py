# modelled on: doctor-real-1's a19 (IndicTrans2) and b12 (InternLM2): checkpoints whose code lives in their repository
# (a minimal shape written for infertune's doctor corpus; not copied code)
# InternLM2 is not implemented by transformers: the Auto classes refuse it without trust_remote_code=True (one finding,
# at the model's load). Qwen2.5 is native and needs no flag; an -hf conversion is native too.
from transformers import AutoModelForCausalLM, AutoTokenizer

NAME = "internlm/internlm2-chat-7b"
tok = AutoTokenizer.from_pretrained(NAME)
lm = AutoModelForCausalLM.from_pretrained(NAME, device_map="auto", dtype="auto")  # expect: IT035
fine = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B-Instruct", device_map="auto", dtype="auto")
conv = AutoModelForCausalLM.from_pretrained("OpenGVLab/InternVL3-1B-hf", device_map="auto", dtype="auto")
ok = AutoModelForCausalLM.from_pretrained(NAME, trust_remote_code=True, revision="0a1b2c3", device_map="auto", dtype="auto")
