# modelled on: ModelCloud/GPTQModel examples/quantization/transformers_usage.py (load, then save)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
import sys
repo = sys.argv[1]
AutoTokenizer.from_pretrained(repo).save_pretrained("models/" + repo)
AutoModelForCausalLM.from_pretrained(repo).save_pretrained("models/" + repo)
