# modelled on: streamlit and batch scripts that load once (cached, guarded, or once per model name)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import streamlit as st
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

_translator = None


@st.cache_resource
def load(name: str):
    return pipeline("summarization", model=name)


def translator():
    global _translator
    if _translator is None:
        _translator = pipeline("translation", model="Helsinki-NLP/opus-mt-de-en")
    return _translator


def per_model(names, text):
    outs = []
    for name in names:
        tok = AutoTokenizer.from_pretrained(name)
        model = AutoModelForSeq2SeqLM.from_pretrained(name)
        outs.append(tok.decode(model.generate(**tok(text, return_tensors="pt"))[0], skip_special_tokens=True))
    return outs


summarize = load("facebook/bart-large-cnn")
st.write(summarize(st.text_area("text"), truncation=True)[0]["summary_text"])
