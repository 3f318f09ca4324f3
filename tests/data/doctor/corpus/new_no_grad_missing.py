# modelled on: classification and embedding scripts that run the model's forward without no_grad
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

name = "distilbert-base-uncased-finetuned-sst-2-english"
tok = AutoTokenizer.from_pretrained(name)
model = AutoModelForSequenceClassification.from_pretrained(name).to("cuda")
for text in open("reviews.txt"):
    enc = tok(text, return_tensors="pt", truncation=True).to("cuda")
    logits = model(**enc).logits  # expect: IT030
    print(logits.argmax(-1).item())


@torch.inference_mode()
def score(text):
    return model(**tok(text, return_tensors="pt").to("cuda")).logits


with torch.no_grad():
    print(model(**tok("fine", return_tensors="pt").to("cuda")).logits)
