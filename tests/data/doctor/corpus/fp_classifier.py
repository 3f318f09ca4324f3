# modelled on: farhanaa-noor/BAI-HW BAI/tokenizer.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import AutoModelForSequenceClassification, pipeline
name = "distilbert-base-uncased-finetuned-sst-2-english"
clf_model = AutoModelForSequenceClassification.from_pretrained(name)
tk = AutoTokenizer.from_pretrained(name)
clf = pipeline("sentiment-analysis", model=clf_model, tokenizer=tk)
print(clf("I have waited for this course all my life."))
