# modelled on: fine-tuning loops, whose forward needs autograd
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

tok = AutoTokenizer.from_pretrained("bert-base-uncased")
model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased").to("cuda")
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
for text, label in [("good", 1), ("bad", 0)]:
    out = model(**tok(text, return_tensors="pt").to("cuda"), labels=torch.tensor([label], device="cuda"))
    out.loss.backward()
    optimizer.step()
    optimizer.zero_grad()
