# modelled on: Florence-2 captioning scripts that decode with special tokens and hand the text to the processor's parser
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from PIL import Image
from transformers import AutoModelForCausalLM, AutoProcessor

model_id = "microsoft/Florence-2-base"
model = AutoModelForCausalLM.from_pretrained(model_id, dtype=torch.float16, device_map="cuda")
processor = AutoProcessor.from_pretrained(model_id)
image = Image.open("photo.jpg")
inputs = processor(text="<CAPTION>", images=image, return_tensors="pt").to("cuda", torch.float16)
ids = model.generate(input_ids=inputs["input_ids"], pixel_values=inputs["pixel_values"], max_new_tokens=64)
text = processor.batch_decode(ids, skip_special_tokens=False)[0]
print(processor.post_process_generation(text, task="<CAPTION>", image_size=image.size))
