# modelled on: rcpaffenroth/DS553_demo test.py (doctor-real-3 dev e18)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# pipeline("text-generation") with no model loads GPT-2, a base model: a Gradio box that continues the user's text
# shows the prompt with its continuation by design, and a CPU is enough for it.
import gradio as gr
from transformers import pipeline

writer = pipeline("text-generation")


def continue_text(start):
    return writer(start)[0]["generated_text"]


gr.Interface(fn=continue_text, inputs="text", outputs="text").launch()
