# modelled on: zibingao/IDS721-week9 week9.py (doctor-real-1 b15: an openai-gpt continuation page)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import streamlit as st
from transformers import pipeline
@st.cache_resource
def writer():
    return pipeline("text-generation", model="openai-gpt")
gen = writer()
seed = st.text_area("Start a story")
if st.button("Continue") and seed:
    st.write(gen(seed, max_new_tokens=40, do_sample=True)[0]["generated_text"])
