# modelled on: model-card style scripts that ask for FlashAttention 2 and also fall back to the CPU in fp32
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForSpeechSeq2Seq, AutoProcessor, pipeline

dev = "cuda:0" if torch.cuda.is_available() else "cpu"
dt = torch.float16 if torch.cuda.is_available() else torch.float32
m = AutoModelForSpeechSeq2Seq.from_pretrained(
    "openai/whisper-large-v3",
    dtype=dt,
    attn_implementation="flash_attention_2",  # expect: IT009
).to(dev)
p = AutoProcessor.from_pretrained("openai/whisper-large-v3")
asr = pipeline(
    "automatic-speech-recognition", model=m, tokenizer=p.tokenizer, feature_extractor=p.feature_extractor, device=dev
)
print(asr("clip.flac")["text"])
