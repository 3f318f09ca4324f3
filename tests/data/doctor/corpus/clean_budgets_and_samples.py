# modelled on: dsaikris/KrisApps Chat_With_Blaby (doctor-real-3 e22), gyu-don/my-pretrain generate.py (e38) and
# Wyrine/whisper_experiments test.py (e13)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# max_length written from the input's length is a new-token budget; a two-character literal prompt leaves
# max_length=200 all but whole; one clip taken from a streamed data set is a sample, not a job for a CPU.
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, WhisperForConditionalGeneration, WhisperProcessor

tok = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("./my-gpt2-pretrain")
ids = tok.encode("User: hi\nassistant:", return_tensors="pt")
reply = lm.generate(ids, max_length=ids.shape[1] + 50)
print(tok.decode(reply[0, ids.shape[1]:], skip_special_tokens=True))
short = tok("牛丼", return_tensors="pt")
print(tok.decode(lm.generate(short.input_ids, max_length=200, do_sample=True)[0][short.input_ids.shape[1]:]))

proc = WhisperProcessor.from_pretrained("openai/whisper-medium")
asr = WhisperForConditionalGeneration.from_pretrained("openai/whisper-medium")
clips = load_dataset("some/voice-corpus", split="test", streaming=True)
clip = next(iter(clips))["audio"]["array"]
feats = proc(clip, sampling_rate=16000, return_tensors="pt").input_features
print(proc.batch_decode(asr.generate(feats), skip_special_tokens=True))
