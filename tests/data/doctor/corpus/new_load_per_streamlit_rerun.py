# modelled on: Streamlit chat apps that load the model at the top of the script, which Streamlit reruns on every input
# (a minimal shape written for infertune's doctor corpus; not copied code)
# One finding per loader of the page, at its first load: real labels count the loads of the module level, or of
# one class, as one problem (doctor-real-5 p17, doctor-real-9 k15), and each function that loads another model as
# one more (doctor-real-23 a07): the summarizer's below is the second.
import streamlit as st
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

tok = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-1.5B-Instruct")
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B-Instruct", dtype="auto", device_map="auto")  # expect: IT023


def summarizer():
    return pipeline("summarization", model="facebook/bart-large-cnn", device=0)  # expect: IT023


@st.cache_resource
def translator():
    return pipeline("translation", model="Helsinki-NLP/opus-mt-de-en", device=0)


if "qa" not in st.session_state:
    st.session_state.qa = pipeline("question-answering", model="deepset/roberta-base-squad2", device=0)

question = st.text_input("Ask")
if question:
    messages = [{"role": "user", "content": question}]
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt").to(model.device)
    st.write(tok.decode(model.generate(ids, max_new_tokens=128)[0][ids.shape[1] :], skip_special_tokens=True))
    st.write(summarizer()(question)[0]["summary_text"], translator()(question)[0]["translation_text"])
