# modelled on: retrieval apps that load a BGE embedding model and mean-pool its tokens
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModel, AutoTokenizer

tok = AutoTokenizer.from_pretrained("BAAI/bge-small-en-v1.5")
model = AutoModel.from_pretrained("BAAI/bge-small-en-v1.5")
enc = tok("what is a kv cache?", return_tensors="pt")
with torch.inference_mode():
    vec = torch.mean(model(**enc).last_hidden_state, dim=1)  # expect: IT026
    cls = model(**enc).last_hidden_state[:, 0]
