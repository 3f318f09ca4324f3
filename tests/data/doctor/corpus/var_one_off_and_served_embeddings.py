# modelled on: sentence-transformers snippets run once (doctor-real-3 e12, e37) and an embedding service's handler (e34)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# One pass over literal sentences at module level: autograd's cost is paid once and freed (silent). The same pass in
# a request handler repeats for every request (IT030).
from fastapi import FastAPI
from transformers import AutoModel, AutoTokenizer

NAME = "intfloat/e5-large-v2"  # (335M: a 22M MiniLM's graph would be negligible, doctor-real-9 n03)
tok = AutoTokenizer.from_pretrained(NAME)
enc = AutoModel.from_pretrained(NAME)
sample = tok(["first note", "second note"], padding=True, return_tensors="pt")
print(enc(**sample).last_hidden_state.shape)

api = FastAPI()


@api.post("/embed")
def embed(texts: list[str]):
    batch = tok(texts, padding=True, truncation=True, return_tensors="pt")
    hidden = enc(**batch).last_hidden_state  # expect: IT030
    mask = batch["attention_mask"].unsqueeze(-1)
    return ((hidden * mask).sum(1) / mask.sum(1)).tolist()
