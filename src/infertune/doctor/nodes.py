"""What the doctor's rules are made of (standard library only): findings, the target, and small AST helpers."""

from __future__ import annotations

from infertune.doctor import patterns
from infertune.doctor import syntax as ast

TYPE_CHECKING = False  # (typing's own: importing typing costs a fresh check ~2 ms; type checkers read it as True)
if TYPE_CHECKING:
    import re

# the regular-expression flags the rules use (re.IGNORECASE, re.MULTILINE, re.DOTALL): `re` itself stays unimported
# on the fast path, the patterns coming from doctor.patterns' store (its import was ~2 ms of a fresh check)
IGNORECASE, MULTILINE, DOTALL = 2, 8, 16


class _Lazy:
    """A regular expression compiled when first used (through the kept programs of doctor.patterns): compiling the
    rules' ~30 patterns at import was half of the doctor modules' import time, and a script meets only some."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern, self.flags = pattern, flags
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> object:  # search, match, sub, ...: the compiled pattern's
        if self._compiled is None:
            self._compiled = patterns.compile(self.pattern, self.flags)
        return getattr(self._compiled, name)


def lazy_compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """`re.compile`, deferred to the pattern's first use."""
    return _Lazy(pattern, flags)  # type: ignore[return-value]


class Record:
    """Equality and repr over `_fields`, as a dataclass has them, without importing dataclasses: its import of
    inspect (with dis, tokenize and linecache) was a fifth of a fresh check's start-up (benchmarks/README.md,
    "doctor_speed"). Defining __eq__ leaves the class unhashable, as a mutable dataclass is."""

    _fields: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, k) == getattr(other, k) for k in self._fields)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={getattr(self, k)!r}' for k in self._fields)})"


class Finding(Record):
    _fields = ("path", "line", "col", "rule", "message", "fix")

    def __init__(self, path: str, line: int, col: int, rule: str, message: str, fix: str) -> None:
        self.path, self.line, self.col, self.rule, self.message, self.fix = path, line, col, rule, message, fix

    def model_dump(self) -> dict:
        return {k: getattr(self, k) for k in self._fields}


class Target(Record):
    """Where the script runs: the card (optional) and the transformers versions it may meet, as the lowest
    and highest version the script's pins allow (None: unbounded or unknown) and where that was read."""

    _fields = (
        "gpu_name",
        "gpu_memory_bytes",
        "compute_capability",
        "transformers_min",
        "transformers_max",
        "version_source",
    )

    def __init__(
        self,
        gpu_name: str | None = None,
        gpu_memory_bytes: int | None = None,
        compute_capability: float | None = None,
        transformers_min: tuple[int, ...] | None = None,
        transformers_max: tuple[int, ...] | None = None,
        version_source: str | None = None,  # the pin's file, or "--target-version"
    ) -> None:
        self.gpu_name, self.gpu_memory_bytes, self.compute_capability = gpu_name, gpu_memory_bytes, compute_capability
        self.transformers_min, self.transformers_max = transformers_min, transformers_max
        self.version_source = version_source

    def copy(self) -> Target:
        return Target(**{k: getattr(self, k) for k in self._fields})

    @property
    def transformers_major(self) -> int | None:
        """The major version when the pins settle it (both bounds in one major)."""
        lo, hi = self.transformers_min, self.transformers_max
        if lo and hi and lo[0] == hi[0]:
            return lo[0]
        if lo and lo[0] >= 5:
            return lo[0]
        if hi and hi[0] < 5:
            return 4
        return None

    @property
    def pinned_major(self) -> int | None:
        """The major version when the script's pins (or --target-version) settle it."""
        return self.transformers_major if self.version_source else None

    def may_be_before(self, version: tuple[int, ...]) -> bool:
        """Could the script run on a transformers older than `version`? (False when unknown.)"""
        return self.transformers_max is not None and self.transformers_max < version

    def at_least(self, version: tuple[int, ...]) -> bool:
        """Do the pins say `version` or later? (False when unknown.)"""
        return self.transformers_min is not None and self.transformers_min >= version


MODEL_CLASS = lazy_compile(r"^(Auto\w*Model\w*|\w+For\w+|\w+LMHeadModel|\w+Model)$")
NOT_MODELS = {"AutoConfig", "GenerationConfig", "AutoTokenizer", "AutoProcessor", "PretrainedConfig"}
TOKENIZER_CLASS = lazy_compile(r"(Tokenizer\w*|Processor)$")
GENERATIVE = lazy_compile(
    r"(CausalLM|Seq2SeqLM|ConditionalGeneration|LMHeadModel|Vision2Seq|ImageTextToText|"
    r"SpeechSeq2Seq|TextToWaveform)$"
)
_SEQ2SEQ = lazy_compile(
    r"(Seq2SeqLM|SpeechSeq2Seq|EncoderDecoderModel|T5\w*|Bart\w*|Marian\w*|Pegasus\w*|Whisper\w*|"
    r"\w+ForConditionalGeneration|BlipForQuestionAnswering)$"
)  # (BLIP's VQA: the question goes through the text encoder, the answer decoder starts from BOS: doctor-real-12 c10)
# vision-language models whose class is *ForConditionalGeneration but whose language model is decoder-only: their
# output starts with the prompt, they load in fp32 without a dtype, their batches pad on the left
DECODER_VLM = lazy_compile(
    r"^(Llava\w*|Qwen2VL|Qwen2_5_VL|Qwen3VL\w*|PaliGemma|Idefics\d?|Mllama|Gemma3|Mistral3|InternVL|AyaVision|"
    r"Kosmos2|Chameleon|Emu3|Llama4|SmolVLM|Fuyu|Glm4v\w*)ForConditionalGeneration$"
)


class _EncoderDecoder:
    """`ENCODER_DECODER.search(class_name)`: a seq2seq class (T5, BART, Marian, Whisper, ...), not a decoder-only
    vision-language model that shares the *ForConditionalGeneration name."""

    @staticmethod
    def search(name: str) -> bool:
        return bool(_SEQ2SEQ.search(name)) and not DECODER_VLM.search(name)


ENCODER_DECODER = _EncoderDecoder()
# encoder-decoder checkpoints by the id's last part, for a load through a class that does not say (AutoModel,
# a pipeline given an id): their output holds no prompt (doctor-real-5 p12: BlenderBot through AutoModel)
SEQ2SEQ_ID = lazy_compile(
    r"blenderbot|(^|[-_/])(flan-|m)?t5(-|$)|bart|pegasus|opus-mt|marian|m2m100|nllb|whisper", IGNORECASE
)
MOVES = {
    "to",
    "cuda",
    "eval",
    "half",
    "float",
    "bfloat16",
    "requires_grad_",
    "train",
    "cpu",
    "npu",
    "xpu",
    "merge_and_unload",
}
# Runtimes other than PyTorch (ONNX Runtime, OpenVINO, TF, Flax, Neuron...): their own devices and dtypes.
OTHER_RUNTIME = lazy_compile(r"^(ORT|OV|IPEX|Neuron|TF|Flax|MLX|Gaudi|Habana)")
PASSTHROUGH = {"get_peft_model", "prepare_model_for_kbit_training"}
PLACES = {"to", "cuda", "npu", "xpu"}
QUANTIZED_ID = lazy_compile(r"gptq|awq|exl2|bnb|[-_]int[48]|[-_][48]bit|fp8|gguf|quantized|mlx", IGNORECASE)


def dotted(node: ast.AST | None) -> str:
    """`a.b.c` for Name/Attribute chains, `f()` for a call's function ('' for anything else)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head else node.attr
    if isinstance(node, ast.Call):
        return dotted(node.func) + "()"
    return ""


def kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def pipeline_model(pipe: ast.Call) -> ast.expr | None:
    """What `pipeline(task, model, ...)` was given as its model (keyword or second argument)."""
    return kw(pipe, "model") or (pipe.args[1] if len(pipe.args) > 1 else None)


def task_given(pipe: ast.Call) -> ast.expr | None:
    """What `pipeline(task, ...)` was given as its task (first argument or keyword)."""
    return pipe.args[0] if pipe.args else kw(pipe, "task")


def task_of(pipe: ast.Call):
    """A pipeline's task, when written as a literal."""
    return const(task_given(pipe))


def has_star_kwargs(call: ast.Call) -> bool:
    return any(k.arg is None for k in call.keywords)


def const(node: ast.AST | None):
    """A literal's value (strings, numbers, True/False/None; `torch.float32`-style attributes as their name)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute) and dotted(node).startswith("torch."):
        return node.attr
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value if isinstance(node.operand.value, (int, float)) else None
    return None


def method(call: ast.AST) -> str | None:
    return call.func.attr if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) else None


def receiver(call: ast.AST) -> ast.expr | None:
    """`x` of a method call `x.m(...)` (None for anything else)."""
    return call.func.value if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) else None


def id_name(model: str | None) -> str:
    """A model id's (or path's) last part: "meta-llama/Llama-2-7b-hf" -> "Llama-2-7b-hf"; "" for none."""
    return (model or "").rstrip("/").rsplit("/", 1)[-1]


def local_path(model_id: str) -> bool:
    """A path on this machine (`./models_finetune`, `/data/ckpt`, `~/m`), not a Hub id."""
    return model_id.startswith((".", "/", "~"))


def callee(call: ast.Call) -> str:
    return dotted(call.func).split(".")[-1]


# what opens a new scope, and the statements that repeat their body (comprehensions are left to each rule)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
LOOPS = (ast.For, ast.AsyncFor, ast.While)


def edits(a: str, b: str) -> int:
    """Levenshtein distance (short strings; difflib would cost the doctor's start-up an import)."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def parameter_of(fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, arg: ast.AST) -> str | None:
    """The parameter of `fn` that `call` passes `arg` to (by position or by keyword), or None where it cannot tell
    (a starred argument before it, a method's `self`, more arguments than parameters)."""
    for k in call.keywords:
        if k.value is arg:
            return k.arg
    if arg not in call.args or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    if params[:1] in (["self"], ["cls"]) and isinstance(call.func, ast.Attribute):
        params = params[1:]
    i = call.args.index(arg)
    return params[i] if i < len(params) else None


def dtype_keywords(c: ast.Call) -> tuple[ast.expr | None, ast.expr | None]:
    return kw(c, "dtype"), kw(c, "torch_dtype")
