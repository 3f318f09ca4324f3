"""Shared fixtures: tiny random-weight models built here (deterministic, a few MB, no hub needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "What is the capital of France? Answer in one sentence.",
    "The capital of France is Paris. Rivers run under old stone bridges.",
    "Explain in two sentences what a KV cache is in a language model.",
    "Write a short poem about the sea. Summarize the library's new wing.",
] * 20


def build_tiny_model(folder: Path, chat_template: bool = True, dtype: str = "float32", seed: int = 0,
                     layers: int = 2, max_shard_size: str | None = None) -> Path:
    """A 2-layer (by default) Llama with GQA and tied embeddings, plus a byte-level BPE tokenizer trained on the spot
    (`max_shard_size`, e.g. "100KB": safetensors shards and an index)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  bos_token="<|im_start|>")
    if chat_template:
        tok.chat_template = CHATML
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=1024, tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).to(getattr(torch, dtype))
    model.save_pretrained(folder, **({"max_shard_size": max_shard_size} if max_shard_size else {}))
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model)


@pytest.fixture()
def infertune_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("INFERTUNE_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # tests never reach a model hub
    # the host calibration (seconds, minutes on a busy machine) is tested on its own (test_expected.py); elsewhere
    # CPU estimates use the probed rates, so no test waits on it or depends on what it measured
    monkeypatch.setenv("INFERTUNE_NO_CALIBRATION", "1")


@pytest.fixture(scope="session")
def demo_model() -> Path:
    """The embedded model, prepared in the normal infertune cache (once, ~1 minute; then reused)."""
    from infertune import models

    return models.prepare("smollm2")


class Started:
    """A command run as a test runs it, remembering every process it starts (polled while it runs), so a
    test checks its own processes only, never another user's."""

    def __init__(self, args: list[str], **popen):
        import subprocess
        import threading

        import psutil

        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
        self.seen: dict[int, psutil.Process] = {}
        self._me = psutil.Process(self.proc.pid)
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        import time

        import psutil

        while self.proc.poll() is None:
            try:
                for c in self._me.children(recursive=True):
                    self.seen.setdefault(c.pid, c)
            except psutil.Error:
                pass
            time.sleep(0.1)

    def communicate(self, timeout: float):
        out, err = self.proc.communicate(timeout=timeout)
        self._poller.join()
        return out, err

    def alive(self) -> list:
        """The processes it started that still run (a zombie awaiting its reaper does not)."""
        import psutil

        out = []
        for p in self.seen.values():
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except psutil.Error:
                pass
        return out
