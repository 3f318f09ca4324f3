"""The classic inference mistakes, found statically in a script's AST (never executed).

Each rule is a function over one parsed file that yields findings; `RULES` lists them with their id, a
short name and the fix. Heuristics are tuned to stay silent on a correct script: a rule fires only on a
pattern that is wrong (or needs review) wherever it appears. The why of each is in docs/doctor.md.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pydantic import BaseModel


class Finding(BaseModel):
    path: str
    line: int
    col: int
    rule: str
    message: str
    fix: str


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    summary: str
    fix: str
    check: Callable[[Script], Iterator[tuple[ast.AST, str]]]


@dataclass
class Target:
    """What the user says about where the script runs (optional): the card's memory and compute capability,
    and the installed transformers major version (defaults change across 4.x -> 5.x)."""

    gpu_name: str | None = None
    gpu_memory_bytes: int | None = None
    compute_capability: float | None = None
    transformers_major: int | None = None


MODEL_LOADERS = re.compile(r"(^Auto(Model\w*)$)|(\w+For(CausalLM|ConditionalGeneration|Seq2SeqLM|\w+)$)|(^\w*Model$)")
NOT_MODELS = {"AutoTokenizer", "AutoProcessor", "AutoConfig", "AutoImageProcessor", "AutoFeatureExtractor",
              "AutoVideoProcessor", "GenerationConfig", "PeftModel"}
SAMPLING = ("temperature", "top_p", "top_k", "repetition_penalty", "typical_p", "min_p")
HANDLER_DECORATORS = {"get", "post", "put", "route", "api_route", "websocket", "patch"}
# Role markers of chat templates written by hand (ChatML, Llama 2/3, Gemma, Zephyr, plain transcripts).
CHAT_MARKERS = re.compile(r"<\|im_start\|>|\[INST\]|<\|user\|>|<\|assistant\|>|<start_of_turn>|"
                          r"<\|start_header_id\|>|(^|\n)\s*(User|Human|USER|Assistant|ASSISTANT|### Instruction)\s*:")
SINGLE_TOKEN = re.compile(r"\s*(<\|?[^<>\s]+\|?>|\[/?INST\])\s*")
# Memory sizes of common cards, GB as sold (a max_memory equal to one of them is "the whole card").
CARD_SIZES_GB = (8, 12, 16, 24, 32, 40, 48, 80, 94, 96, 141, 180, 192, 288)


def dotted(node: ast.AST) -> str:
    """`a.b.c` for Name/Attribute chains ('' for anything else)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head else node.attr
    if isinstance(node, ast.Call):  # X.from_pretrained(...).to(...): the chain's call
        return dotted(node.func) + "()"
    return ""


def kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def has_star_kwargs(call: ast.Call) -> bool:
    return any(k.arg is None for k in call.keywords)


def const(node: ast.AST | None):
    """A literal's value (strings, numbers, True/False/None; torch.float32-style attributes as their name)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute) and dotted(node).startswith("torch."):
        return node.attr
    return None


@dataclass
class Script:
    """One parsed file and what the rules share: model loads, generate calls, names bound to them."""

    path: str
    source: str
    tree: ast.Module
    target: Target = field(default_factory=Target)
    # the loaded model's generation_config.json when it is available locally (None: unknown)
    generation_defaults: dict | None = None

    def __post_init__(self) -> None:
        self.lines = self.source.splitlines()
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        self.calls = [n for n in ast.walk(self.tree) if isinstance(n, ast.Call)]
        self.loads = [c for c in self.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "from_pretrained"
                      and self._is_model_class(c.func.value)]
        self.generates = [c for c in self.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "generate"]
        self.model_names = {self.bound_name(c) for c in self.loads} - {None}
        self.generate_names = {self.bound_name(c) for c in self.generates} - {None}

    @staticmethod
    def _is_model_class(node: ast.AST) -> bool:
        name = dotted(node).split(".")[-1]
        return name not in NOT_MODELS and bool(MODEL_LOADERS.search(name))

    def bound_name(self, call: ast.Call) -> str | None:
        """The variable a call's result is assigned to (`x = call(...)`, also through `.to(...)`/`.eval()`)."""
        node: ast.AST = call
        while isinstance(self.parents.get(node), ast.Attribute) and isinstance(self.parents.get(
                self.parents[node]), ast.Call):
            node = self.parents[self.parents[node]]
        parent = self.parents.get(node)
        if isinstance(parent, (ast.Assign, ast.AnnAssign)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if len(targets) == 1:
                return dotted(targets[0]) or None
        return None

    def calls_method(self, method: str) -> list[ast.Call]:
        return [c for c in self.calls if isinstance(c.func, ast.Attribute) and c.func.attr == method]

    def calls_named(self, name: str) -> list[ast.Call]:
        return [c for c in self.calls if dotted(c.func).split(".")[-1] == name]

    def enclosing_function(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node
        return None

    def comment_near(self, line: int) -> str:
        """Comments on this line and the one above (rules may read intent from them)."""
        out = []
        for n in (line - 1, line):
            if 1 <= n <= len(self.lines) and "#" in self.lines[n - 1]:
                out.append(self.lines[n - 1].split("#", 1)[1])
        return " ".join(out).lower()


# --- the rules -------------------------------------------------------------------------------------------


def missing_dtype(s: Script):
    for c in s.loads:
        if kw(c, "dtype") is None and kw(c, "torch_dtype") is None and not has_star_kwargs(c):
            if s.target.transformers_major is not None and s.target.transformers_major >= 5:
                yield c, ("from_pretrained without dtype: transformers 5 loads the checkpoint's dtype, but 4.x loads "
                          "fp32 (twice the memory of a bf16 checkpoint): say which you mean")
            else:
                yield c, "from_pretrained without dtype loads fp32 on transformers 4.x: twice the memory, slower"


def model_on_cpu(s: Script):
    placed = {dotted(c.func.value) for c in s.calls_method("to") + s.calls_method("cuda")
              if isinstance(c.func, ast.Attribute)}
    for c in s.loads:
        if kw(c, "device_map") is not None or has_star_kwargs(c):
            continue
        parent = s.parents.get(c)
        if isinstance(parent, ast.Attribute) and parent.attr in ("to", "cuda"):  # X.from_pretrained(...).to(...)
            continue
        name = s.bound_name(c)
        if name is None or name in placed:
            continue
        yield c, f"`{name}` is loaded without device_map and never moved: it runs on the CPU (seconds per token)"


def hand_built_chat_prompt(s: Script):
    if s.calls_method("apply_chat_template"):
        return
    for node in ast.walk(s.tree):
        if isinstance(node, ast.JoinedStr):  # an f-string: its literal parts together
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if isinstance(s.parents.get(node), (ast.Expr, ast.JoinedStr)):  # a docstring, or part of the above
                continue
            text = node.value
        else:
            continue
        parent = s.parents.get(node)
        if ("{%" in text or (isinstance(parent, ast.Call) and dotted(parent.func).startswith("re."))
                or SINGLE_TOKEN.fullmatch(text)):
            continue  # a chat template's own Jinja source, a pattern looking for markers, a special-token name
        if CHAT_MARKERS.search(text):
            yield node, "a chat prompt built by hand: the model was trained on its own chat template"


def _is_generate_output(s: Script, node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute) and node.func.attr == "generate"
    return isinstance(node, ast.Name) and node.id in s.generate_names


def undecoded_prompt(s: Script):
    if any("Seq2Seq" in dotted(c.func) or "ConditionalGeneration" in dotted(c.func) for c in s.loads):
        return  # encoder-decoder outputs do not repeat the prompt
    for c in s.calls_method("decode") + s.calls_method("batch_decode"):
        if not c.args:
            continue
        arg = c.args[0]
        if _is_generate_output(s, arg):
            yield c, "decoding the whole generate output: it starts with the prompt tokens"
        elif isinstance(arg, ast.Subscript) and _is_generate_output(s, arg.value) and not _has_slice(arg.slice):
            yield c, "decoding a full generate output row: it starts with the prompt tokens"


def _has_slice(node: ast.AST) -> bool:
    return isinstance(node, ast.Slice) or (isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice)
                                                                                for e in node.elts))


def streamer_same_thread(s: Script):
    streamers = {s.bound_name(c) for c in s.calls_named("TextIteratorStreamer")} - {None}
    if not streamers:
        return
    targets = set()
    for c in s.calls_named("Thread"):
        t = kw(c, "target")
        if t is not None:
            targets.add(dotted(t).split(".")[-1])
    for c in s.generates:
        st = kw(c, "streamer")
        if st is None or dotted(st) not in streamers:
            continue
        fn = s.enclosing_function(c)
        if fn is not None and fn.name in targets:
            continue
        yield c, ("generate with a TextIteratorStreamer in the thread that reads it: nothing streams until "
                  "generation ends (and a streamer timeout raises)")


def compile_outside_generate(s: Script):
    for c in s.calls:
        if dotted(c.func) != "torch.compile" or not c.args:
            continue
        arg = dotted(c.args[0])
        base = arg.removesuffix(".forward")
        if base in s.model_names or base in ("model", "self.model"):
            yield c, ("torch.compile on the model outside generate: every decode step has a new shape and "
                      "recompiles (or falls back)")


def _size(text: str) -> tuple[float, float] | None:
    """A max_memory string as (the number in G units as written, bytes): '80GiB' -> (80, 85.9e9)."""
    m = re.fullmatch(r"\s*([\d.]+)\s*(GiB|GB|G|MiB|MB)\s*", str(text), re.I)
    if not m:
        return None
    v, unit = float(m.group(1)), m.group(2).lower()
    scale = {"gib": 2**30, "gb": 1e9, "g": 1e9, "mib": 2**20, "mb": 1e6}[unit]
    return (v if unit[0] == "g" else v * scale / 1e9), v * scale


def max_memory_full_card(s: Script):
    for c in s.loads:
        mm = kw(c, "max_memory")
        if not isinstance(mm, ast.Dict):
            continue
        for k, v in zip(mm.keys, mm.values, strict=True):
            key, size = const(k), _size(const(v)) if isinstance(const(v), str) else None
            if key in ("cpu", "disk") or key is None or size is None:
                continue
            card = s.target.gpu_memory_bytes
            # without a target card: a size written as a card's (80GB or 80GiB for an "80 GB" card)
            full = size[1] >= 0.9 * card if card else any(abs(size[0] - g) / g < 0.03 for g in CARD_SIZES_GB)
            if card and size[1] > card:
                yield v, (f"max_memory gives device {key} {const(v)}, more than the {s.target.gpu_name}'s "
                          f"{card / 1e9:.0f} GB")
            elif full:
                yield v, (f"max_memory gives device {key} {const(v)}: the whole card for weights leaves nothing "
                          "for the KV cache and activations")


def bnb_4bit(s: Script):
    for c in s.calls_named("BitsAndBytesConfig"):
        if const(kw(c, "load_in_4bit")) is not True:
            continue
        if kw(c, "bnb_4bit_compute_dtype") is None:
            yield c, "4-bit bitsandbytes without bnb_4bit_compute_dtype computes in fp32: slow"
        elif re.search(r"speed|fast|latency|throughput", s.comment_near(c.lineno)):
            yield c, "bitsandbytes 4-bit chosen for speed: it saves memory but dequantizes every matmul (slower)"


def flash_attention(s: Script):
    for c in s.loads:
        if const(kw(c, "attn_implementation")) not in ("flash_attention_2", "flash_attention_3"):
            continue
        if const(kw(c, "device_map")) in ("cpu", "mps"):
            yield c, f"FlashAttention needs a CUDA GPU; this model is placed on {const(kw(c, 'device_map'))}"
        dt = const(kw(c, "dtype") or kw(c, "torch_dtype"))
        no_dtype = kw(c, "dtype") is None and kw(c, "torch_dtype") is None and not has_star_kwargs(c)
        old = s.target.transformers_major is None or s.target.transformers_major < 5
        if dt in ("float32", "float") or (no_dtype and old):
            yield c, "FlashAttention runs only in fp16/bf16: with fp32 weights it refuses to load"
        cc = s.target.compute_capability
        if cc is not None and cc < 8.0:
            yield c, (f"FlashAttention 2 needs an Ampere or newer GPU (compute capability 8.0+); "
                      f"{s.target.gpu_name or 'the target'} has {cc:g}")


def hardcoded_sampling(s: Script):
    known = s.generation_defaults
    for c in s.generates:
        given = [k.arg for k in c.keywords if k.arg in SAMPLING and isinstance(k.value, ast.Constant)]
        if known is None and given:
            yield c, (f"sampling parameters hard-coded ({', '.join(given)}): they override the tuned defaults in "
                      "the model's generation_config.json")
        elif known:  # the model's own file is here: only what it sets is overridden
            over = [f"{k} (model: {known[k]})" for k in given if k in known]
            if over:
                yield c, f"overrides the model's generation_config.json: {', '.join(over)}"


def generate_in_handler(s: Script):
    for fn in ast.walk(s.tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        routes = [d for d in fn.decorator_list if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute)
                  and d.func.attr in HANDLER_DECORATORS]
        if not routes:
            continue
        for c in ast.walk(fn):
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "generate":
                yield c, (f"web handler `{fn.name}` calls generate per request: concurrent requests run one "
                          "after another")
                break


def trust_remote_code(s: Script):
    for c in s.calls:
        v = kw(c, "trust_remote_code")
        if v is not None and const(v) is True:
            yield v, "trust_remote_code=True runs Python shipped with the model: review it, pin the revision"


RULES: list[Rule] = [
    Rule("IT001", "missing-dtype", "from_pretrained without dtype",
         "pass dtype='auto' (the checkpoint's) or dtype=torch.bfloat16", missing_dtype),
    Rule("IT002", "model-on-cpu", "model never placed on an accelerator",
         "pass device_map='auto' (or call .to('cuda')) and check model.device", model_on_cpu),
    Rule("IT003", "hand-built-chat-prompt", "chat prompt assembled by hand",
         "build the prompt with tok.apply_chat_template(messages, add_generation_prompt=True)",
         hand_built_chat_prompt),
    Rule("IT004", "prompt-in-output", "generate output decoded with the prompt",
         "decode out[0, inputs['input_ids'].shape[1]:] (slice the prompt off)", undecoded_prompt),
    Rule("IT005", "streamer-same-thread", "TextIteratorStreamer consumed in generate's thread",
         "run generate in a Thread(target=model.generate, kwargs=...) and iterate the streamer in this one",
         streamer_same_thread),
    Rule("IT006", "compile-outside-generate", "torch.compile on the model",
         "drop torch.compile(model); use generate(..., cache_implementation='static'), which compiles the "
         "decode step itself", compile_outside_generate),
    Rule("IT007", "max-memory-full-card", "max_memory set to the whole card",
         "budget about 80 % of the card (e.g. {0: '64GiB'} on an 80 GB card)", max_memory_full_card),
    Rule("IT008", "bnb-4bit", "bitsandbytes 4-bit without compute dtype or chosen for speed",
         "set bnb_4bit_compute_dtype=torch.bfloat16; for speed, use AWQ/GPTQ kernels, not bitsandbytes", bnb_4bit),
    Rule("IT009", "flash-attention-unsupported", "FlashAttention with fp32 or on a GPU that cannot run it",
         "load in bf16/fp16 (dtype=torch.bfloat16), or use attn_implementation='sdpa' on pre-Ampere GPUs",
         flash_attention),
    Rule("IT010", "hardcoded-sampling", "sampling parameters hard-coded in generate",
         "drop them to use the model's generation_config.json, or set them once in a GenerationConfig on purpose",
         hardcoded_sampling),
    Rule("IT011", "generate-in-web-handler", "a web handler calls generate per request",
         "serve with `transformers serve --continuous-batching`, batch with generate_batch, or use vLLM",
         generate_in_handler),
    Rule("IT012", "trust-remote-code", "trust_remote_code=True",
         "use a model supported natively, or review its code and pin revision=<commit>", trust_remote_code),
]
BY_KEY = {**{r.id.lower(): r for r in RULES}, **{r.name: r for r in RULES}}
SUPPRESS = re.compile(r"#\s*infertune:\s*ignore(?:\[([^\]]*)\])?", re.I)


def suppressed(s: Script, line: int, rule: Rule) -> bool:
    """`# infertune: ignore[IT001]` (id or name, comma-separated) on the line; a bare `ignore` silences all."""
    if not 1 <= line <= len(s.lines):
        return False
    m = SUPPRESS.search(s.lines[line - 1])
    if not m:
        return False
    if m.group(1) is None:
        return True
    keys = {k.strip().lower() for k in m.group(1).split(",")}
    return rule.id.lower() in keys or rule.name in keys


def check_script(s: Script) -> list[Finding]:
    out = []
    for rule in RULES:
        for node, message in rule.check(s):
            line, col = getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1
            end = getattr(node, "end_lineno", line) or line
            if any(suppressed(s, n, rule) for n in range(line, end + 1)):
                continue
            out.append(Finding(path=s.path, line=line, col=col, rule=rule.id, message=message, fix=rule.fix))
    return sorted(out, key=lambda f: (f.line, f.col, f.rule))
