# modelled on: robin-ai-ml/chatbot stream_output_test.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from threading import Thread
from transformers import TextIteratorStreamer
tk = AutoTokenizer.from_pretrained("Qwen/Qwen-7B-Chat", trust_remote_code=True)  # Qwen 1 ships its own code
lm = AutoModelForCausalLM.from_pretrained("Qwen/Qwen-7B-Chat", device_map="auto", dtype="auto",
                                          trust_remote_code=True).eval()
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
lm.to(dev)  # expect: IT020
enc = tk(["introduce suzhou"], return_tensors="pt").to(dev)  # expect: IT013
st = TextIteratorStreamer(tk)  # expect: IT017
gen_kwargs = dict(enc, streamer=st, max_new_tokens=200)
Thread(target=lm.generate, kwargs=gen_kwargs).start()
for piece in st:
    print(piece)
