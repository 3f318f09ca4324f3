"""Each expected figure carries the band its validation measured for that kind of row (estimate/bands.py)."""

from __future__ import annotations

from importlib import resources

import tomllib

from infertune.estimate import bands, estimate
from infertune.estimate.accelerators import find_accelerator
from infertune.estimate.cpus import as_accelerator, find_cpu
from infertune.estimate.memory import EstimateSettings
from infertune.estimate.quant import Quantization
from tests.estimate.test_estimate import llama
from tests.estimate.test_library import moe


def _file() -> dict:
    return tomllib.loads(resources.files("infertune").joinpath("data/speed_bands.toml").read_text(encoding="utf-8"))


def test_every_kind_in_the_file_is_a_band_with_its_rows_and_source():
    t = _file()
    assert t["kind"], "no kinds written"
    for k, row in t["kind"].items():
        b = bands.band(k)
        assert b is not None and (b.low, b.high, b.rows) == (row["low"], row["high"], row["rows"])
        assert b.low <= b.high and b.rows > 0
        assert t["commit"] in b.source and t["date"] in b.source


def test_kinds_split_by_device_phase_and_regime():
    assert bands.kind_of("cuda", "decode", False, False, 512) == "gpu/decode/dense"
    assert bands.kind_of("cuda", "decode", False, False, bands.LONG_PROMPT) == "gpu/decode/long"
    assert bands.kind_of("cuda", "ttft", False, False, bands.LONG_PROMPT) == "gpu/ttft/dense"
    assert bands.kind_of("cuda", "decode", True, False, 512) == "gpu/decode/quantized"
    assert bands.kind_of("cuda", "decode", True, True, 512) == "gpu/decode/moe"
    assert bands.kind_of("cpu", "decode", False, False, 512) == "cpu/decode/dense"


def _est(p, platform: str, **kw):
    s = EstimateSettings(dtype="bfloat16", input_len=512, max_new_tokens=128, platform=platform, **kw)
    acc = find_accelerator("H100 SXM") if platform == "cuda" else as_accelerator(find_cpu("EPYC 7763"))
    return estimate(p, s, acc)


def test_a_gpu_estimate_carries_its_kinds_band():
    sp = _est(llama(), "cuda").speed
    assert sp.kind_tpot == "gpu/decode/dense" and sp.kind_ttft == "gpu/ttft/dense"
    assert sp.band_tpot == bands.band("gpu/decode/dense") and sp.band_ttft == bands.band("gpu/ttft/dense")
    q = _est(llama(), "cuda", quantization=Quantization(method="bnb-nf4")).speed
    assert q.band_tpot is not None and q.band_tpot.kind == "gpu/decode/quantized"
    m = _est(moe(), "cuda").speed
    assert m.band_tpot is not None and m.band_tpot.kind == "gpu/decode/moe"
    assert "validated" in bands.describe(sp.band_tpot, sp.kind_tpot)


def test_a_cpu_estimate_says_no_validation_rows_rather_than_a_band():
    sp = _est(llama(), "cpu").speed
    assert sp.kind_tpot.startswith("cpu/") and sp.band_tpot is None and sp.band_ttft is None
    assert bands.describe(sp.band_tpot, sp.kind_tpot).startswith("no validation rows")
