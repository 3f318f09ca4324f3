# modelled on: Jimmy-2016/DLModels_Pytorch HuggingFace/simpletest.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import pipeline
writer = pipeline("text-generation", model="gpt2")
# silent since h-doc2: a small base model's continuation printed whole is a completion demo's expected output
# (issue 32's real-script labels, doctor-real-1 b15); the same call in a chat (a function named respond/chat/...,
# a User:/Assistant: transcript, a fine-tune) still reports IT004
out = writer("The world is", max_new_tokens=40)
print(out[0]["generated_text"])
