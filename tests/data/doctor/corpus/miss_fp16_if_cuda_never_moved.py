# modelled on: speech scripts that pick fp16 when CUDA exists, then never move the model nor give the pipeline a device
# silent since transformers 4.42: a pipeline given no device moves the model handed to it to cuda:0 when there is
# one, so the fp16 weights do run on the GPU (test_doctor_rules checks the same file pinned before 4.42)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForSpeechSeq2Seq, AutoProcessor, pipeline

half_if_gpu = torch.float16 if torch.cuda.is_available() else torch.float32
asr_model = AutoModelForSpeechSeq2Seq.from_pretrained(
    "openai/whisper-small",
    dtype=half_if_gpu,
)
proc = AutoProcessor.from_pretrained("openai/whisper-small")
asr = pipeline(
    "automatic-speech-recognition",
    model=asr_model,
    tokenizer=proc.tokenizer,
    feature_extractor=proc.feature_extractor,
)
print(asr("talk.wav")["text"])
