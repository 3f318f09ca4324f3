# modelled on: gradio chat demos that load the model inside the chat callback
# (a minimal shape written for infertune's doctor corpus; not copied code)
import gradio as gr
from transformers import pipeline


def respond(message, history):
    chat = pipeline("text-generation", model="distilgpt2")  # expect: IT023
    return chat(message, max_new_tokens=32, return_full_text=False)[0]["generated_text"]


gr.ChatInterface(respond).launch()
