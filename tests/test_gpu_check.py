"""benchmarks/gpu_check.py's logic, end to end on this CPU with toy shapes (`--device cpu --tiny`): the real script,
its child processes and its results file. What only a GPU can show (the figures) is not checked here."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import build_tiny_model

ROOT = Path(__file__).resolve().parent.parent


def test_the_tiny_check_records_every_cell_side_by_side(tmp_path):
    tok = build_tiny_model(tmp_path / "tok")  # its tokenizer: the check copies it into each model it builds
    out, work = tmp_path / "out", tmp_path / "work"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--out", str(out), "--work", str(work)]
    cmd += ["--device", "cpu", "--tiny", "--tok", str(tok), "--calibration-timeout-s", "2", "--reserve-s", "0"]
    ran = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.json", "gpu_check.md", "gpu_check_logs.tgz"]
    res = json.loads((out / "gpu_check.json").read_text())
    assert res["finished"] and res["built"] == ["tiny-llama", "tiny-moe"]
    rows = {r["index"]: r for r in res["cells"]}
    assert [rows[i]["status"] for i in range(4)] == ["ok", "ok", "failed", "timeout"]
    for ok in (rows[0], rows[1]):  # measured and estimated side by side, and their ratios
        m, e, r = ok["measured"], ok["estimate"], ok["ratios"]
        assert m["ttft_s"] > 0 and m["tpot_s"] > 0 and m["peak_bytes"] > 0 and m["output_tokens"] > 0
        assert e["expected_ttft_s"] > 0 and e["expected_tpot_s"] > 0 and e["peak_bytes"] > 0
        assert r["tpot"] == e["expected_tpot_s"] / m["tpot_s"] and r["peak"] == e["peak_bytes"] / m["peak_bytes"]
        assert ok["measure_estimate"]["expected_tpot_s"] is not None  # measure's own estimate beside it
    assert "FlashAttention" in rows[2]["error"]  # the impossible setting, as the trial said it
    assert rows[3]["seconds"] < 10 and "measured" not in rows[3]  # killed at its 2 s timeout
    assert res["crosscheck"]["status"] == "ok" and res["crosscheck"]["loop_tpot_s"] > 0
    assert res["crosscheck"]["measure_over_loop_tpot"] > 0
    assert res["calibration"]["status"] == "timeout"  # 2 s: the cells never waited on it
    assert res["tune"]["status"] == "ok" and res["tune"]["steps"][0]["technique"] == "baseline"
    assert res["tune"]["steps"][0]["status"] == "ok", res["tune"]["steps"]
    table = (out / "gpu_check.md").read_text()
    assert table.count("| tiny-") == 4 and "| timeout |" in table and "cells: ok 2, failed 1, timeout 1" in table
