# modelled on: rsandham/wsl2-llm scripts/test_load.py (load-and-save variant)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
name = "Qwen/Qwen2.5-0.5B-Instruct"
lm = AutoModelForCausalLM.from_pretrained(name, dtype="auto")
AutoTokenizer.from_pretrained(name).save_pretrained("./local")
lm.save_pretrained("./local")
