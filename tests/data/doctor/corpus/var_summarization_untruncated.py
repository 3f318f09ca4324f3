# modelled on: PENDHOTAPOORNITHA/Sumscribe summarizer.py (doctor-real-3 dev e10) and doctor-real-1's a12, doctor-real-2's d28
# (a minimal shape written for infertune's doctor corpus; not copied code)
# BART reads at most 1024 positions: a transcript of unbounded length fails the pipeline unless truncated or chunked.
# The literal and the sliced text below are bounded; the T5 summarizer has relative positions.
from transformers import pipeline

bart = pipeline("summarization", model="facebook/bart-large-cnn")
t5 = pipeline("summarization", model="google-t5/t5-small")


def summarize(transcript):
    whole = bart(transcript, max_length=200, min_length=60, do_sample=False)  # expect: IT034
    cut = bart(transcript[:3000], max_length=200)
    safe = bart(transcript, truncation=True, max_length=200)
    other = t5(transcript, max_length=200)
    first_words = " ".join(transcript.split()[:500])  # (doctor-real-3 e11: 500 words fit 1024 tokens)
    bounded = bart(first_words, max_length=200)
    return whole, cut, safe, other, bounded


print(bart("Short literal notes about the meeting.", max_length=30))
