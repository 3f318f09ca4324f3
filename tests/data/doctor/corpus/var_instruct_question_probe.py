# modelled on: the question-shaped counterparts of doctor-real-2's d17 and d24 (a chat checkpoint asked a question as raw text)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# The same probe with a question instead of a sentence to finish: the chat model answers off-format (IT013). The
# printed answer starts with the question, but a one-shot print of a question written in the file is read by a person
# who sees both (doctor-real-8 y03 and four earlier blind labels say so; d24's label says otherwise): no IT004.
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

NAME = "Qwen/Qwen2.5-1.5B-Instruct"
tok = AutoTokenizer.from_pretrained(NAME)
lm = AutoModelForCausalLM.from_pretrained(NAME, dtype=torch.bfloat16, device_map="auto")
question = "Why is the sky blue?"
enc = tok(question, return_tensors="pt").to(lm.device)  # expect: IT013
print(tok.decode(lm.generate(**enc, max_new_tokens=60)[0], skip_special_tokens=True))
