# modelled on: evaluation scripts that draw N samples per prompt with N pipeline or generate calls
# (a minimal shape written for infertune's doctor corpus; not copied code)
import csv
import time

from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

generator = pipeline("text-generation", model="openai-community/gpt2", device=0)
rows = csv.writer(open("samples.csv", "w"))
for prompt in open("prompts.txt"):
    for i in range(10):
        text = generator(prompt, do_sample=True, max_new_tokens=40, return_full_text=False)  # expect: IT029
        rows.writerow([prompt, i, text[0]["generated_text"]])

tok = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-0.5B")
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype="auto", device_map="auto")
enc = tok("Once upon a time", return_tensors="pt").to(model.device)
N_SAMPLES = 4
stories = [model.generate(**enc, do_sample=True, max_new_tokens=64) for _ in range(N_SAMPLES)]  # expect: IT029

# silent: one call for all samples; a growing text; a timing loop; a new input each pass
many = model.generate(**enc, do_sample=True, num_return_sequences=4, max_new_tokens=64)
text = "Once upon a time"
for _ in range(3):
    ids = tok(text, return_tensors="pt").to(model.device)
    out = model.generate(**ids, max_new_tokens=64)
    text += tok.decode(out[0][ids["input_ids"].shape[1] :], skip_special_tokens=True)
for _ in range(5):
    t0 = time.perf_counter()
    model.generate(**enc, max_new_tokens=64)
    print(time.perf_counter() - t0)
batches, outs = [enc, enc], []
for i in range(2):
    outs.append(model.generate(**batches[i], max_new_tokens=64))
