# modelled on: streaming chat nodes that template the conversation and hand generate to a Thread through a kwargs dict
# (a minimal shape written for infertune's doctor corpus; not copied code)
from threading import Thread

from transformers import AutoModelForCausalLM, AutoTokenizer, TextIteratorStreamer

tok = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-1.5B-Instruct")
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B-Instruct", dtype="auto", device_map="auto")


def chat(message):
    conversation = [{"role": "user", "content": message}]
    input_ids = tok.apply_chat_template(conversation, return_tensors="pt").to(model.device)  # expect: IT018
    streamer = TextIteratorStreamer(tok, skip_prompt=True, skip_special_tokens=True)
    generate_kwargs = dict(input_ids=input_ids, streamer=streamer, max_new_tokens=256)
    Thread(target=model.generate, kwargs=generate_kwargs).start()
    yield from streamer
