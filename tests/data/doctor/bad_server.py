import torch
from fastapi import FastAPI
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig, TextIteratorStreamer

tok = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-7B-Instruct")
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B-Instruct", trust_remote_code=True,
                                             attn_implementation="flash_attention_2")
model = torch.compile(model)
q = BitsAndBytesConfig(load_in_4bit=True)
big = AutoModelForCausalLM.from_pretrained("x/y", dtype=torch.float16, device_map="auto",
                                           max_memory={0: "80GiB", "cpu": "64GiB"}, quantization_config=q)
app = FastAPI()


@app.post("/generate")
def generate(prompt: str):
    text = f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"
    inputs = tok(text, return_tensors="pt")
    out = model.generate(**inputs, max_new_tokens=256, temperature=0.7, top_p=0.9)
    return {"text": tok.decode(out[0], skip_special_tokens=True)}


streamer = TextIteratorStreamer(tok)
model.generate(**tok("hi", return_tensors="pt"), streamer=streamer)
for piece in streamer:
    print(piece)

# a draft for assisted generation (generate(..., assistant_model=draft))
draft = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct", device_map="cuda")
