# modelled on: dipeshdebnath/captioningapp app/captioner.py (doctor-real-3 dev e25)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# A vision encoder-decoder captioner kept on the CPU on purpose: max_length bounds the caption alone (there is no
# text prompt), and the decoded ids hold only the caption.
import torch
from transformers import AutoImageProcessor, AutoTokenizer, VisionEncoderDecoderModel

REPO = "someone/small-image-captioner"
captioner = VisionEncoderDecoderModel.from_pretrained(REPO)
words = AutoTokenizer.from_pretrained(REPO)
pixels = AutoImageProcessor.from_pretrained(REPO)
cpu = torch.device("cpu")  # a light deployment: the CPU is the target
captioner.to(cpu)


def caption(image):
    values = pixels(images=image, return_tensors="pt").pixel_values.to(cpu)
    ids = captioner.generate(values, max_length=48, num_beams=3)
    return words.decode(ids[0], skip_special_tokens=True)
