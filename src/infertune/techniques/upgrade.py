"""Library upgrades: known version-specific problems of the target's libraries, each with its source, and
the upgrade that removes it. The versions come from intake (--lib NAME=VERSION, or this host's)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from infertune.techniques.base import Category, Check, Facts, Setup, Technique, parse_version, register
from infertune.techniques.factors import package_version


@dataclass(frozen=True)
class KnownProblem:
    package: str
    bad_from: str | None  # first affected release (None: every release before `fixed`)
    fixed: str  # first release without the problem
    when: Callable[[Facts, Setup], bool]  # the setups it bites
    what: str
    addresses: tuple[Category, ...]
    factor: str | None  # the documented factor (techniques.factors) the upgrade removes, if any
    source: str
    refuses: bool = False  # the setup does not run as stated (a request or a load refused), whatever the estimate
    # the memory the problem adds beyond the estimate for this workload, where its source says how much (None: not
    # priced): an unstated version's problem explains an out-of-memory only if it adds about what was missing
    extra_bytes: Callable[[Facts, Setup], int] | None = None

    def requirement(self) -> str:
        return f">={self.fixed}"

    def affects(self, f: Facts, s: Setup) -> bool | None:
        """True: the target's version has the problem for this setup; None: the version is unknown."""
        if not self.when(f, s):
            return False
        if not f.known(self.package) and not (s.packages or {}).get(self.package):
            return None
        v = package_version(f, s, self.package)
        if v is None:  # not installed: nothing to upgrade
            return False
        return (self.bad_from is None or v >= parse_version(self.bad_from)) and v < parse_version(self.fixed)

    def question(self) -> str:
        span = f"{self.bad_from} to before {self.fixed}" if self.bad_from else f"before {self.fixed}"
        return f"Which {self.package} version runs on the target? ({span}: {self.what}; --lib {self.package}=VERSION)"


@dataclass(frozen=True)
class BuildMismatch(KnownProblem):
    """A compiled extension whose prebuilt wheels are made against one torch release: under another torch it does not
    load and the package falls back to a slow path. Not a version range: the cure is the build for the torch the
    target runs (`requirement`). `built_for`: release -> the torch its wheels were built against (the package's own
    installation table); a release not in it (or a source build) is unknown."""

    built_for: tuple[tuple[str, str], ...] = ()

    def requirement(self) -> str:
        return "a build for the target's torch"

    def affects(self, f: Facts, s: Setup) -> bool | None:
        if not self.when(f, s):
            return False
        if (s.packages or {}).get(self.package) == self.requirement():
            return False  # the move: the build made for the torch it runs with
        if not (f.known(self.package) and f.known("torch")):
            return None
        v, torch = package_version(f, s, self.package), package_version(f, s, "torch")
        if v is None:
            return False  # not installed: nothing of it runs
        built = dict(self.built_for).get(".".join(map(str, v)))
        if built is None or torch is None:
            return None
        return parse_version(built)[:2] != torch[:2]

    def question(self) -> str:
        return (
            f"Does the log say 'CUDA extension not installed' ({self.package}'s kernels not loaded: {self.what})? "
            f"Which {self.package} and torch run on the target? (--lib {self.package}=VERSION --lib torch=VERSION)"
        )


AUTO_GPTQ_BUILT_FOR = (("0.5.1", "2.1.0"), ("0.6.0", "2.1.1"), ("0.7.0", "2.2.0"), ("0.7.1", "2.2.1"))

KNOWN_PROBLEMS: tuple[KnownProblem, ...] = (
    KnownProblem(
        package="bitsandbytes",
        bad_from=None,
        fixed="0.40.0",
        when=lambda f, s: s.quantization == "bnb-4bit",
        what="4-bit inference had no fast kernel for batch 1: decode ~3.4x slower",
        addresses=("decode-speed",),
        factor="bnb-4bit-old-kernels",
        source="https://github.com/TimDettmers/bitsandbytes/releases/tag/0.40.0",
    ),
    KnownProblem(
        package="transformers",
        bad_from="4.45.0",
        fixed="4.47.0",
        when=lambda f, s: s.engine == "transformers",
        what="the first generate call copies the logits of the whole prompt (prompt x vocabulary, fp32) "
        "before slicing the last position: a memory spike at long prompts the estimate does not show",
        # at the first generate call, never while loading
        addresses=("kv-cache-growth", "long-input-attention"),
        factor=None,
        source="https://github.com/huggingface/transformers/issues/34796",
        # the whole prompt's logits in fp32: prompts x prompt length x vocabulary x 4 bytes
        extra_bytes=lambda f, s: f.batch * f.input_len * (f.profile.vocab_size or 0) * 4,
    ),
    KnownProblem(
        package="transformers",
        bad_from="4.38.0",
        fixed="4.40.0",
        when=lambda f, s: s.engine == "transformers" and f.profile.model_type in ("llama", "gemma"),
        what="Llama-family models keep a causal-mask buffer sized to max_position_embeddings squared: more memory "
        "than 4.37 with identical code, OOM where 4.37 fitted, and slower steps (the mask is sliced and "
        "expanded at every forward)",
        addresses=("load-memory", "kv-cache-growth", "long-input-attention", "decode-speed", "prefill-speed"),
        factor=None,
        source="https://github.com/huggingface/transformers/issues/29484",
        # a bool buffer of max_position_embeddings squared, expanded at every forward to a (batch, 1, positions,
        # positions) mask in the model's dtype (modeling_llama 4.38: register_buffer("causal_mask", ...) and
        # _update_causal_mask): small for 2k-4k positions, tens of GiB for 128k
        extra_bytes=lambda f, s: (f.profile.max_position_embeddings or 0) ** 2 * (1 + f.batch * _dtype_bytes(s)),
    ),
    KnownProblem(
        package="transformers",
        bad_from=None,
        fixed="4.11.0",
        when=lambda f, s: s.engine == "transformers" and f.profile.model_type == "gpt_neo",
        what="GPT-Neo's local attention padded and reshaped its windows so that memory grew irregularly with the "
        "generated length (out of memory beyond a few hundred tokens); 4.11 simplified local attention",
        addresses=("kv-cache-growth", "long-input-attention"),
        factor=None,
        source="https://github.com/huggingface/transformers/pull/13491",
    ),
    KnownProblem(
        package="vllm",
        bad_from="0.5.1",
        fixed="0.6.5",
        when=lambda f, s: (
            f.profile.model_type == "gemma2"
            and ("vllm" in f.stated or s.engine == "vllm")
            and f.input_len + f.max_new_tokens > (f.profile.sliding_window or 4096)
        ),
        what="vLLM ran Gemma 2's interleaved sliding-window layers as global attention and capped the context at "
        "the 4096-token window (longer requests refused); 0.6.5 serves the full 8k context",
        addresses=("long-input-attention", "kv-cache-growth"),
        factor=None,
        source="https://github.com/vllm-project/vllm/pull/10584",
        refuses=True,
    ),
    KnownProblem(
        package="sglang",
        bad_from=None,
        fixed="0.3.1",
        # MLA was opt-in (--enable-mla) then, which intake cannot state: a cause only where the user saw slow decode
        when=lambda f, s: (
            bool(f.profile.kv_lora_rank)
            and ("sglang" in f.stated or s.engine == "sglang")
            and f.batch * f.concurrency <= 8
            and f.observed is not None
            and bool(f.observed.tpot_s or f.observed.tokens_per_s or f.observed.e2e_s)
        ),
        what="SGLang's MLA attention (--enable-mla) ran its Triton kernels without CUDA graphs, so decode at small "
        "batches was launch-bound: DeepSeek-Coder-V2-Lite measured 4x faster per token once the Triton backend "
        "captured CUDA graphs (after 0.3.0)",
        addresses=("decode-speed",),
        factor=None,
        source="https://github.com/sgl-project/sglang/pull/1401",
    ),
    KnownProblem(
        package="transformers",
        bad_from=None,
        fixed="5.0.0",
        when=lambda f, s: s.engine == "transformers" and bool(f.profile.num_experts),
        what="mixture-of-experts layers run their experts in a Python loop over nn.Linear modules (grouped and "
        "batched expert matmuls came with 5.0)",
        addresses=("decode-speed", "prefill-speed"),
        factor="moe-expert-loop",
        source="https://github.com/huggingface/transformers/pull/42697",
    ),
    BuildMismatch(
        package="auto-gptq",
        bad_from=None,
        fixed="0.7.1",
        when=lambda f, s: s.quantization == "gptq" and f.platform == "cuda" and s.engine == "transformers",
        what="auto-gptq's prebuilt CUDA kernels are compiled against one torch release; under another torch they do "
        "not load ('CUDA extension not installed') and GPTQ layers fall back to a slow path",
        addresses=("decode-speed", "prefill-speed"),
        factor="gptq-kernel-unbuilt",
        source="https://github.com/AutoGPTQ/AutoGPTQ/blob/main/docs/INSTALLATION.md",
        built_for=AUTO_GPTQ_BUILT_FOR,
    ),
)


@register
class Upgrade(Technique):
    id = "upgrade"
    family = "upgrade"
    title = "Upgrade a library past a known problem of the installed version"
    addresses = ("decode-speed", "prefill-speed", "load-memory", "kv-cache-growth", "long-input-attention")
    priority = 3  # no quality risk, nothing else changes: first when it applies
    cures_known_problem = True
    tradeoffs = ("an upgrade can bring other changes: pin the new version and re-run your checks",)
    docs = tuple(p.source for p in KNOWN_PROBLEMS)

    def problems(self, f: Facts, s: Setup) -> list[KnownProblem]:
        """The known problems of the target's versions for this setup; where nobody stated the version, also
        those whose symptom the user saw (Facts.observed): the upgrade is then a step with an open question."""
        return [p for p in KNOWN_PROBLEMS if p.affects(f, s) or (p.affects(f, s) is None and _seen(f, p))]

    def check(self, f: Facts, s: Setup) -> Check:
        c = Check().need(bool(self.problems(f, s)), "no known problem in the target's library versions for this setup")
        c.issues += [p.question() for p in self.problems(f, s) if p.affects(f, s) is None]
        return c

    def moves(self, f: Facts, s: Setup) -> list[Setup]:
        return [self.apply_one(s, p) for p in self.problems(f, s)]

    def apply_one(self, s: Setup, p: KnownProblem) -> Setup:
        return s.model_copy(update={"packages": {**(s.packages or {}), p.package: p.requirement()}})

    def apply(self, f: Facts, s: Setup) -> Setup:
        return self.moves(f, s)[0]

    def addressed(self, before: Setup, after: Setup) -> tuple[Category, ...]:
        problem = self.fixes(before, after)
        return problem.addresses if problem else self.addresses

    def known_issues(self, before: Setup, after: Setup) -> list[str]:
        problem = self.fixes(before, after)
        return [f"known problem: {problem.what} ({problem.source})"] if problem else []

    def note(self, before: Setup, after: Setup) -> str | None:
        problem = self.fixes(before, after)
        if problem is None or problem.factor is not None:
            return None
        return f"a known problem the estimate does not model: {problem.what} ({problem.source})"

    def crosses_major(self, f: Facts, before: Setup, after: Setup) -> bool:
        """The move is a new major release of the package (the stated version in an older major line, or, unstated,
        a fix that only a new major's first release has): not "nothing else changes", since a major release breaks
        APIs and models that ship their own code do not get its fix."""
        problem = self.fixes(before, after)
        if problem is None:
            return False
        fixed = parse_version(problem.fixed)
        now = package_version(f, before, problem.package)
        if now is not None:
            return now[0] < fixed[0]
        return fixed[0] >= 1 and fixed[1:] == (0, 0)

    def fixes(self, before: Setup, after: Setup) -> KnownProblem | None:
        """The problem this move removes."""
        for p in KNOWN_PROBLEMS:
            if (after.packages or {}).get(p.package) == p.requirement() and (before.packages or {}).get(
                p.package
            ) != p.requirement():
                return p
        return None


def _dtype_bytes(s: Setup) -> int:
    return 4 if s.dtype == "float32" else 2


def _seen(f: Facts, p: KnownProblem) -> bool:
    """The user saw a symptom this problem causes: a speed (time per token, tokens/s, request time, TTFT) for a
    speed problem, an out-of-memory for a memory one."""
    o = f.observed
    if o is None:
        return False
    speed = bool(o.tpot_s or o.tokens_per_s or o.e2e_s or o.ttft_s)
    memory = o.oom is not None
    return (speed and bool({"decode-speed", "prefill-speed"} & set(p.addresses))) or (
        memory and bool({"load-memory", "kv-cache-growth", "long-input-attention"} & set(p.addresses))
    )
