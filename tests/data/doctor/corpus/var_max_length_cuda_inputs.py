# modelled on: wwwsec/hugging_face_demos text_generation/gpt2.py (max_length as the budget)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("microsoft/phi-2")
lm = AutoModelForCausalLM.from_pretrained("microsoft/phi-2", dtype=torch.float16)
lm.cuda()
ids = tk("Instruct: Write a poem about the sea.\nOutput:", return_tensors="pt").input_ids.cuda()
out = lm.generate(ids, max_length=200)  # (a 12-token literal prompt in a 200-token budget: all but whole, no IT014)
print(tk.batch_decode(out)[0])  # expect: IT004
