# modelled on: PPMark0712/llm-cute-eval llm_cute_eval/model_format/llama2_format.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("meta-llama/Llama-2-7b-chat-hf")
lm = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-chat-hf", dtype=torch.float16, device_map="auto")
def chat(user_msg, turns):
    text = ""
    for q, a in turns:
        text += f"[INST] {q} [/INST] {a} "  # expect: IT003
    text += f"[INST] {user_msg} [/INST]"  # (the same prompt: one finding)
    enc = tk(text, return_tensors="pt").to("cuda")
    out = lm.generate(**enc, max_new_tokens=256, do_sample=True, temperature=0.6)  # expect: IT010
    return tk.decode(out[0], skip_special_tokens=True).split("[/INST]")[-1].strip()
