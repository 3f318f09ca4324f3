# modelled on: sentiment and summarisation scripts that hand a whole list to a GPU pipeline with no batch_size
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import pipeline

classifier = pipeline("sentiment-analysis", model="distilbert-base-uncased-finetuned-sst-2-english", device=0)
reviews = [line.strip() for line in open("reviews.txt")]
results = classifier(reviews)  # expect: IT028
batched = classifier(reviews, batch_size=32)
one = classifier(reviews[0])
cpu = pipeline("sentiment-analysis", model="distilbert-base-uncased-finetuned-sst-2-english")
print(results, batched, one, cpu(reviews), classifier.device)
