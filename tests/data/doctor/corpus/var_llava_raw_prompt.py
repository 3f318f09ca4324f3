# modelled on: gonakamaru/weather-forecast poc_image_prompt__llava-hf__llava-v1_6-mistral-7b-hf.py (doctor-real-1 c09)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from PIL import Image
from transformers import AutoModelForVision2Seq, AutoProcessor
proc = AutoProcessor.from_pretrained("llava-hf/llava-v1.6-mistral-7b-hf")
vlm = AutoModelForVision2Seq.from_pretrained("llava-hf/llava-v1.6-mistral-7b-hf", dtype=torch.float16, device_map="auto")
pic = Image.open("chart.png")
bare = proc(text="<image>\nWhat does it show?", images=pic, return_tensors="pt").to(vlm.device)  # expect: IT013
said = vlm.generate(**bare, max_new_tokens=60)
print(proc.decode(said[0][bare["input_ids"].shape[1]:], skip_special_tokens=True))
documented = proc(text="USER: <image>\nWhat does it show? ASSISTANT:", images=pic, return_tensors="pt").to(vlm.device)
