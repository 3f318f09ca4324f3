# modelled on: rsandham/wsl2-llm scripts/test_load.py and Zhangwenyao1/DreamVLA gpt_flash_attention.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
lm = AutoModelForCausalLM.from_pretrained(
    "codellama/CodeLlama-13b-hf",
    device_map="auto",
    dtype=torch.float32,
    attn_implementation="flash_attention_2",  # expect: IT009
    max_memory={0: "24GiB", "cpu": "64GiB"},  # expect: IT007
)
