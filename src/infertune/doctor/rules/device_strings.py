"""IT052: a device string torch rejects: `"CPU"`, `"GPU"`, `"cudo"`, `"cuda0"`. torch parses a device as a
lower-case type with an optional `:index` (`"cuda:0"`), so `.to("CPU")`, `torch.device("gpu")` or
`pipeline(..., device="cudo")` raise a RuntimeError before anything runs ("Expected one of cpu, cuda, ... device
type at start of device string"). doctor-real-17 d01: `device = "CPU"` then `.to(device)`, labelled
`other:invalid-device-string`. Only strings that look meant for a device are read: a case or spelling slip of
`cpu`, `cuda` or `mps`, or `gpu`."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import IGNORECASE, const, dotted, edits, kw, lazy_compile, method
from infertune.doctor.script import Script

VALID = lazy_compile(r"(cpu|cuda|mps|xpu|npu|hpu|meta|mtia|xla|ipu|mlu|musa|privateuseone)(:\d+)?")
DEVICE_MAP_WORDS = {"auto", "balanced", "balanced_low_0", "sequential", "disk"}
MEANT = lazy_compile(r"(cpu|cuda|mps|gpu)\W*\d*", IGNORECASE)


def _places(s: Script) -> list[ast.expr]:
    """Values handed to torch as a device: `.to(x)`, `torch.device(x)`, a `device=` or `device_map=` keyword."""
    out: list[ast.expr] = []
    for c in s.calls:
        if (method(c) == "to" or dotted(c.func) == "torch.device") and c.args:
            out.append(c.args[0])
        out += [v for k in ("device", "device_map") if (v := kw(c, k)) is not None]
    return out


def _rejected(text: str) -> bool:
    if VALID.fullmatch(text) or text in DEVICE_MAP_WORDS:
        return False
    low = text.lower()
    return bool(MEANT.fullmatch(low)) or min(edits(low, w) for w in ("cuda", "cpu")) == 1


def invalid_device(s: Script):
    seen: set[int] = set()
    for place in _places(s):
        for o in s.origins(place) or [place]:
            text = const(o)
            if isinstance(text, str) and id(o) not in seen and _rejected(text):
                seen.add(id(o))
                yield (
                    o,
                    f"device {text!r} is no device torch knows (lower-case type, optional :index, such as 'cuda:0' "
                    "or 'cpu'): .to(), torch.device() and pipeline() raise a RuntimeError",
                )
