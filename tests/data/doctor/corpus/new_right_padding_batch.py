# modelled on: batch generation scripts for GPT-2-family and Llama models that pad a list of prompts together
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained("EleutherAI/pythia-1.4b")
tok.pad_token = tok.eos_token
model = AutoModelForCausalLM.from_pretrained("EleutherAI/pythia-1.4b", dtype="auto", device_map="auto")
prompts = ["The capital of France is", "Write a haiku about a long winter night:"]
batch = tok(prompts, return_tensors="pt", padding=True).to(model.device)  # expect: IT024
out = model.generate(**batch, max_new_tokens=32)
print(tok.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True))
