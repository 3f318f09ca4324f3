# modelled on: joshua-paperspace/RAG-App-Example main.py (the generator moved into an engine class)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from threading import Thread
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from transformers import TextIteratorStreamer
class Engine:
    def __init__(self, name):
        self.tk = AutoTokenizer.from_pretrained(name)
        self.lm = AutoModelForCausalLM.from_pretrained(name, dtype="auto", device_map="auto")
    def stream(self, prompt):
        msgs = [{"role": "user", "content": prompt}]
        ids = self.tk.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt").to(self.lm.device)
        st = TextIteratorStreamer(self.tk, skip_prompt=True)
        Thread(target=self.lm.generate, kwargs=dict(input_ids=ids, streamer=st, max_new_tokens=256)).start()
        yield from st
engine = Engine("Qwen/Qwen2.5-7B-Instruct")
app = FastAPI()
@app.post("/chat")
def chat(prompt: str):
    return StreamingResponse(engine.stream(prompt))  # expect: IT011
