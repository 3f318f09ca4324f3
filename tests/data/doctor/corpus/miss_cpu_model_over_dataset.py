# modelled on: data-preparation scripts that translate a whole CSV column row by row with a model left on the CPU
# (a minimal shape written for infertune's doctor corpus; not copied code)
import pandas as pd
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained("facebook/nllb-200-3.3B")
model = AutoModelForSeq2SeqLM.from_pretrained("facebook/nllb-200-3.3B")  # expect: IT002


def translate(text):
    enc = tok(text, return_tensors="pt", truncation=True)
    return tok.decode(model.generate(**enc, max_new_tokens=128)[0], skip_special_tokens=True)


df = pd.read_csv("train.csv")
df["translated"] = df["text"].apply(translate)
df.to_csv("train_translated.csv", index=False)
