# modelled on: yucl80/ai_demo prompt_engine/prompt_2.py (an async batch script)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
import asyncio
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")
async def main():
    enc = tk("Hello, I'm a language model", return_tensors="pt").to(lm.device)
    out = lm.generate(**enc, max_new_tokens=30)
    print(tk.decode(out[0][enc.input_ids.shape[1]:]))
asyncio.run(main())
