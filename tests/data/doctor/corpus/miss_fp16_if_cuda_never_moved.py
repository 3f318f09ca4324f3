# modelled on: speech scripts that pick fp16 when CUDA exists, then never move the model nor give the pipeline a device
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForSpeechSeq2Seq, AutoProcessor, pipeline

half_if_gpu = torch.float16 if torch.cuda.is_available() else torch.float32
asr_model = AutoModelForSpeechSeq2Seq.from_pretrained(
    "openai/whisper-small",
    dtype=half_if_gpu,  # expect: IT031
)
proc = AutoProcessor.from_pretrained("openai/whisper-small")
asr = pipeline(  # expect: IT002
    "automatic-speech-recognition",
    model=asr_model,
    tokenizer=proc.tokenizer,
    feature_extractor=proc.feature_extractor,
)
print(asr("talk.wav")["text"])
