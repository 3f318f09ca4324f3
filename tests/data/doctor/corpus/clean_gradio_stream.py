# modelled on: sunil448832/mistral-deployment frontend.py (ChatInterface generator)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
import gradio as gr
from threading import Thread
from transformers import TextIteratorStreamer
tk = AutoTokenizer.from_pretrained("HuggingFaceH4/zephyr-7b-beta")
lm = AutoModelForCausalLM.from_pretrained("HuggingFaceH4/zephyr-7b-beta", dtype="auto", device_map="auto")
def respond(message, history):
    msgs = [{"role": "user", "content": message}]
    ids = tk.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt").to(lm.device)
    st = TextIteratorStreamer(tk, skip_prompt=True, skip_special_tokens=True)
    Thread(target=lm.generate, kwargs={"input_ids": ids, "streamer": st, "max_new_tokens": 512}).start()
    partial = ""
    for piece in st:
        partial += piece
        yield partial
gr.ChatInterface(respond).launch()
