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


def build_tiny_model(
    folder: Path,
    chat_template: bool = True,
    dtype: str = "float32",
    seed: int = 0,
    layers: int = 2,
    max_shard_size: str | None = None,
) -> Path:
    """A 2-layer (by default) Llama with GQA and tied embeddings, plus a byte-level BPE tokenizer trained on the spot
    (`max_shard_size`, e.g. "100KB": safetensors shards and an index)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(
        CORPUS,
        trainers.BpeTrainer(
            vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token="<|im_start|>"
    )
    if chat_template:
        tok.chat_template = CHATML
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
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
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # tests never reach a model hub (child processes read the variable,
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)  # this one read it at import)
    # the host calibration (seconds, minutes on a busy machine) is tested on its own (test_expected.py); elsewhere
    # CPU estimates use the probed rates, so no test waits on it or depends on what it measured
    monkeypatch.setenv("INFERTUNE_NO_CALIBRATION", "1")
    # kept answers are tested on their own (test_answers.py); elsewhere a test that changes what a command sees
    # in-process must not be answered from an earlier test's output
    monkeypatch.setenv("INFERTUNE_NO_ANSWER_CACHE", "1")
    monkeypatch.setenv(
        "INFERTUNE_NO_DOCTOR_CACHE", "1"
    )  # the same for the doctor's findings cache (test_doctor_cache.py)


@pytest.fixture(scope="session")
def demo_model() -> Path:
    """The embedded model, prepared in the normal infertune cache (once, ~1 minute; then reused)."""
    from infertune.models import store

    return store.prepare("smollm2")


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


# --- a real browser for the report pages -------------------------------------------------------------------

CHECK_JS = """
window.addEventListener('load', () => {
  const vw = document.documentElement.clientWidth, wide = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if ((r.width || r.height) && (r.right > vw + 1 || r.left < -1))
      wide.push(`${el.tagName.toLowerCase()}.${el.className} ${Math.round(r.left)}..${Math.round(r.right)}`);
  }
  const top = el => el ? el.getBoundingClientRect().top + window.scrollY : null;
  const out = {viewport: vw, scroll_width: document.documentElement.scrollWidth, wide: wide.slice(0, 20),
               images: [...document.images].map(i => ({alt: i.alt, loaded: i.complete && i.naturalWidth > 0,
                                                       width: i.getBoundingClientRect().width})),
               verdict_top: top(document.getElementById('verdict')),
               first_chart_top: top(document.querySelector('figure'))};
  const pre = document.createElement('pre');
  pre.id = 'infertune-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
"""


class Browser:
    """Headless Chromium: lays a page out at a viewport width and reports what a person would see."""

    def __init__(self, exe: str):
        self.exe = exe

    def _run(self, *args: str) -> str:
        import subprocess

        r = subprocess.run(
            [
                self.exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--disable-extensions",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout

    def layout(self, page: Path, width: int = 1280, height: int = 900) -> dict:
        """Overflow (elements past the viewport's edges), images loaded, where the verdict and the first
        chart sit; measured by a script added to a copy of the page (the page itself runs no check)."""
        import html
        import json
        import re
        import tempfile

        text = Path(page).read_text(encoding="utf-8")
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "page.html"
            copy.write_text(text.replace("</body>", f"<script>{CHECK_JS}</script></body>"), encoding="utf-8")
            dom = self._run(
                f"--window-size={width},{height}", "--virtual-time-budget=15000", "--dump-dom", copy.as_uri()
            )
        found = re.search(r"<pre id=\"infertune-check\">(.*?)</pre>", dom, re.S)
        assert found, "the check script did not run: " + dom[-500:]
        return json.loads(html.unescape(found.group(1)))

    def screenshot(self, page: Path, out: Path, width: int = 1280, height: int = 2000) -> Path:
        self._run(
            f"--window-size={width},{height}",
            "--virtual-time-budget=15000",
            f"--screenshot={out}",
            Path(page).absolute().as_uri(),
        )
        return out


@pytest.fixture(scope="session")
def browser() -> Browser:
    import shutil

    exe = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if exe is None:
        pytest.skip("no Chromium on PATH: scripts/test.sh installs Debian's chromium with apt-get when run as root")
    return Browser(exe)
