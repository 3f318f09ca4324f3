# modelled on: https://github.com/lm-sys/FastChat/issues/2691 (do_sample follows the temperature)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
import argparse
ap = argparse.ArgumentParser()
ap.add_argument("--temperature", type=float, default=0.7)
args = ap.parse_args()
tk = AutoTokenizer.from_pretrained("lmsys/vicuna-7b-v1.5")
lm = AutoModelForCausalLM.from_pretrained("lmsys/vicuna-7b-v1.5", dtype=torch.float16, device_map="auto")
msgs = [{"role": "user", "content": "hello"}]
ids = tk.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt").to(lm.device)
out = lm.generate(ids, do_sample=args.temperature > 1e-5, temperature=args.temperature, max_new_tokens=64)
print(tk.decode(out[0][ids.shape[1]:], skip_special_tokens=True))
