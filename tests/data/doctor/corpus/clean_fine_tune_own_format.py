# modelled on: bots running someone's own fine-tune with the base checkpoint's tokenizer and the fine-tune's [INST] format
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

tk = AutoTokenizer.from_pretrained("meta-llama/Llama-2-7b-chat-hf")
lm = AutoModelForCausalLM.from_pretrained("acme-bank/support-llama-sft", dtype=torch.float16, device_map="auto")
gen = pipeline("text-generation", model=lm, tokenizer=tk)


def handle(question):
    res = gen(f"[INST] {question} [/INST]", max_new_tokens=128, return_full_text=False)
    return res[0]["generated_text"]
