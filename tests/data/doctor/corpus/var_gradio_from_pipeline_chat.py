# modelled on: FuReSH/ki-playground app/app4.py (doctor-real-3 e31)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# A 7B chat checkpoint in a pipeline with no device and no dtype (on the CPU before transformers 4.42, on cuda:0 in
# fp32 on 4.42+ 4.x: one finding), wrapped by Gradio, which hands it the textbox's raw string (no chat template).
import gradio as gr
from transformers import pipeline

chat = pipeline("text-generation", model="meta-llama/Llama-2-7b-chat-hf")  # expect: IT002
ui = gr.Interface.from_pipeline(chat)  # expect: IT013
ui.launch()
