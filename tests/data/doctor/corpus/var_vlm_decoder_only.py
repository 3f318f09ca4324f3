# modelled on: mahe7998/python colpali/hf_sample.py (doctor-real-1 c02: a Qwen2-VL load "in half precision" with no dtype)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from PIL import Image
from transformers import AutoProcessor, LlavaForConditionalGeneration, Qwen2VLForConditionalGeneration
qvl = Qwen2VLForConditionalGeneration.from_pretrained("Qwen/Qwen2-VL-2B-Instruct", device_map="auto")  # expect: IT001
llava = LlavaForConditionalGeneration.from_pretrained("llava-hf/llava-1.5-7b-hf", dtype=torch.float16, device_map="auto")
proc = AutoProcessor.from_pretrained("llava-hf/llava-1.5-7b-hf")
chat = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is it?"}]}]
text = proc.apply_chat_template(chat, add_generation_prompt=True)
enc = proc(images=Image.open("cat.png"), text=text, return_tensors="pt").to(llava.device, torch.float16)
out = llava.generate(**enc, max_new_tokens=40)
print(proc.batch_decode(out, skip_special_tokens=True)[0])  # expect: IT004
