"""The workload: what the user runs, as a validated spec read from YAML/TOML and CLI flags.

A workload is the *same* for a baseline and every candidate configuration, so the numbers compare.
Shrinking it (shorter input, fewer new tokens, lower concurrency) is a workload trade-off, never a fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from infertune.core.errors import UserError, validated
from infertune.core.validate import MAX_TOKENS, Count, Passes, Seed, Tokens, Untimed

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str


# A prompt is raw text (tokenized as is) or a conversation (rendered with the model's chat template).
Prompt = str | list[ChatMessage]

# A small, representative chat set: a factual one-liner, an explanation, a creative task, a summary.
# The first question has one right answer, so a broken configuration is visible in the text.
DEFAULT_PROMPTS: list[list[dict[str, str]]] = [
    [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}],
    [{"role": "user", "content": "Explain in two sentences what a KV cache is in a language model."}],
    [{"role": "user", "content": "Write a short poem about the sea."}],
    [
        {
            "role": "user",
            "content": "Summarize in one sentence: The library opened a new wing last spring. "
            "It holds rare maps, a reading room with large windows and a small cafe. "
            "Visitors doubled in the first month.",
        }
    ],
]


class Workload(BaseModel):
    """What is run: the model, the prompts and the generation shape. Defaults are a small chat workload."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field("demo", description="'demo', a local folder, or a hub id found in the local HF cache")
    revision: str | None = Field(None, description="hub revision (branch, tag or commit) for a hub id")
    prompts: list[Prompt] | None = Field(
        None, min_length=1, description="raw strings or chat conversations; default: a built-in chat set"
    )
    input_len: int | None = Field(
        None, ge=1, le=MAX_TOKENS, description="pad every prompt with filler text to exactly this many input tokens"
    )
    input_lens: list[Tokens] | None = Field(
        None,
        min_length=1,
        description="mixed prompt lengths: request k is padded to input_lens[k % n] tokens "
        "(the prompt set cycles until every length is used)",
    )
    max_new_tokens: Tokens = 32
    ignore_eos: bool = Field(False, description="always generate max_new_tokens (fixed-length benchmark)")
    batch: Count = Field(1, description="prompts per generate call")
    concurrency: Count = Field(1, description="requests in flight at once")
    arrival: Literal["burst", "poisson"] = Field(
        "burst", description="concurrent requests arrive all at once, or as a Poisson process at `rate` (seeded)"
    )
    rate: float | None = Field(
        None, gt=0, le=1e6, examples=[1.0], description="requests per second for poisson arrivals"
    )
    repeats: Passes = Field(1, description="timed passes over all prompts")
    warmup: Untimed = Field(1, description="untimed generate calls before timing")
    seed: Seed = 0
    do_sample: bool = Field(False, description="greedy by default: deterministic and comparable")

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if self.arrival == "poisson" and self.rate is None:
            raise ValueError("arrival 'poisson' needs a rate (requests per second)")
        if self.input_len is not None and self.input_lens is not None:
            raise ValueError("give input_len (one length) or input_lens (mixed lengths), not both")
        return self

    @property
    def longest_input(self) -> int | None:
        """The longest requested prompt length (it bounds memory); None: the prompts' natural lengths."""
        return max(self.input_lens) if self.input_lens else self.input_len

    def input_len_of(self, i: int) -> int | None:
        """Length request i is padded to (None: its natural length)."""
        return self.input_lens[i % len(self.input_lens)] if self.input_lens else self.input_len

    def arrivals(self, n: int) -> list[float]:
        """Arrival offsets (seconds) of the n requests of a round: all 0 for a burst; for poisson,
        exponential gaps at `rate`, from a generator seeded with `seed` (the same every run)."""
        if self.arrival == "burst":
            return [0.0] * n
        import numpy as np

        assert self.rate is not None  # _consistent: poisson arrivals have a rate
        gaps = np.random.default_rng(self.seed).exponential(1 / self.rate, size=n)
        return (np.cumsum(gaps) - gaps[0]).tolist()  # the first request opens the round

    def prompt_list(self) -> list[Prompt]:
        """The distinct requests' prompts; with mixed lengths, cycled so every length gets one."""
        base = (
            list(self.prompts)
            if self.prompts is not None
            else [[ChatMessage(**m) for m in conv] for conv in DEFAULT_PROMPTS]
        )
        n = max(len(base), len(self.input_lens or ()))
        return [base[i % len(base)] for i in range(n)]

    def batches(self) -> list[list[int]]:
        """Prompt indices per generate call for one pass; prompts cycle so every batch is full."""
        n = len(self.prompt_list())
        calls = max(1, -(-n // self.batch))
        order = [i % n for i in range(calls * self.batch)]
        return [order[k : k + self.batch] for k in range(0, len(order), self.batch)]


def read_run_file(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parse a YAML, TOML or JSON run file into (workload fields, config fields).

    The file holds workload fields at the top level (or under `workload:`), and optionally the
    InferenceConfig under `config:`, what the user saw under `observed:` (`read_observed`; advise reads
    it, the verbs that run the model leave it) and where tune runs its trials under `cluster:` (`read_cluster`).
    Any problem is one UserError line.
    """
    return _sections(path)[:2]


def read_observed(path: str | Path | None) -> dict[str, Any] | None:
    """A run file's `observed:` section (tpot: 220ms, peak: 23GiB, oom: load, ...) as written; None: none."""
    if path is None:
        return None
    observed = _sections(path)[2]
    if observed is not None and not isinstance(observed, dict):
        raise UserError(f"workload file {path}: section 'observed' must be a mapping (tpot: 220ms, oom: load, ...)")
    return observed


def read_cluster(path: str | Path | None) -> str | None:
    """A run file's `cluster:` (ray, ray=ADDRESS): where tune runs its trials (measure/cluster.py); None: here."""
    if path is None:
        return None
    cluster = _sections(path)[3]
    if cluster is not None and not isinstance(cluster, str):
        raise UserError(f"workload file {path}: 'cluster' must be 'ray' or 'ray=ADDRESS', got {cluster!r}")
    return cluster


def _sections(path: str | Path) -> tuple[dict[str, Any], dict[str, Any], Any, Any]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"workload file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read workload file {path}: {e}") from None
    try:
        if path.suffix.lower() == ".toml":
            data = tomllib.loads(text)
        elif path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, yaml.YAMLError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(f"workload file {path} is not valid {path.suffix.lstrip('.') or 'YAML'}: {reason}") from None
    if data is None or data == {}:  # an empty file would run on defaults: not what its author meant
        raise UserError(f"workload file {path} is empty: give at least one field (model: gpt2, input_len: 512, ...)")
    if not isinstance(data, dict):
        raise UserError(f"workload file {path} must hold a mapping of fields, got {type(data).__name__}")
    config = data.pop("config", None)
    observed = data.pop("observed", None)
    cluster = data.pop("cluster", None)  # tune's: the others leave it
    config = {} if config is None else config  # `config: []` or `config: 0` is an error below, not "empty"
    workload = data.pop("workload") if "workload" in data else data
    for name, section in (("workload", workload), ("config", config)):
        if not isinstance(section, dict):
            raise UserError(f"workload file {path}: section '{name}' must be a mapping")
    if workload is not data and data:
        raise UserError(
            f"workload file {path}: unknown top-level keys {sorted(data)} (use workload:, config:, observed: "
            "and cluster:)"
        )
    return workload, config, observed, cluster


def workload_from(data: dict[str, Any], source: str = "workload", **overrides: Any) -> Workload:
    """Workload from file fields, then CLI flags on top (flags given as None are left out)."""
    return validated(Workload, data, source, overrides)


def load_run(path: str | Path | None = None, **overrides: Any) -> tuple[Workload, dict[str, Any]]:
    """The workload (file fields, flags on top) and the file's raw `config:` section."""
    wl_data, cfg_data = read_run_file(path) if path is not None else ({}, {})
    return workload_from(wl_data, f"workload file {path}" if path else "workload", **overrides), cfg_data


def load_workload(path: str | Path | None = None, **overrides: Any) -> Workload:
    return load_run(path, **overrides)[0]
