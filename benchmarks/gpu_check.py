"""A GPU check in one go (issue #31): random-weight models of real shapes built on the device, `infertune measure`
per cell with `infertune estimate` for the same cell beside it, a hand-timed cross-check of one cell, infertune's
CUDA calibration (timed, per phase) and one short `infertune tune`; nothing from the network.

Everything lands in `--out`: `gpu_check.json` (rewritten after every step, so a killed run keeps what it had),
`gpu_check.md` (the table for benchmarks/README.md) and `gpu_check_logs.tgz` (each step's stdout and stderr).
Each step is a child process with its own timeout; a failed or timed-out cell is a row, never the end of the run.
Order: the environment, the models, the calibration (its own step and timeout: a first `measure` on CUDA would
otherwise calibrate inside the trial's timeout; when it fails, everything after runs with
`INFERTUNE_NO_CALIBRATION=1`), the cells until only `--reserve-s` of `--deadline-s` is left (the rest are rows marked
skipped), the cross-check, the tune.

  python benchmarks/gpu_check.py --out DIR                              # on a GPU machine (~8 min)
  python benchmarks/gpu_check.py --out DIR --device cpu --tiny          # the logic, on toy shapes (~1 min)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEVICE_PY = HERE / "gpu_check_device.py"
sys.path.insert(0, str(HERE))  # gpu_check_report beside this file

from gpu_check_report import add_ratios, json_lines, markdown, ratio, read_estimate, summarise  # noqa: E402  (after the path it is found on)


class Cell(NamedTuple):
    model: str
    dtype: str = "bfloat16"
    attn: str = "sdpa"
    cache: str = "dynamic"
    batch: int = 1
    input_len: int = 512
    new_tokens: int = 64
    timeout_s: float | None = None  # None: --cell-timeout-s
    note: str = ""

    @property
    def id(self) -> str:
        return f"{self.model} {self.dtype} {self.attn} {self.cache} b{self.batch} {self.input_len}+{self.new_tokens}"


def C(model: str, **kw) -> Cell:
    return Cell(model, **kw)


# In the order they run: each model's first cell early, then the sweeps; static caches (compiled by generate on
# CUDA, slow to start) and the big model's long cells last. The two 1B cells of 128 new tokens repeat the
# 2026-12-04 smoke run.
GPU_CELLS = [
    C("llama-1b", new_tokens=128),
    C("llama-8b"),
    C("qwen3-moe-4l"),
    C("smollm2-135m"),
    C("llama-1b", batch=8, input_len=1024, new_tokens=128),
    C("smollm2-135m", attn="eager"),
    C("smollm2-135m", dtype="float16", batch=8, input_len=1024),
    C("smollm2-135m", batch=32, input_len=128),
    C("smollm2-135m", input_len=4096),
    C("llama-1b", input_len=4096),
    C("llama-1b", attn="eager", input_len=4096),
    C("llama-1b", attn="eager", batch=8, input_len=1024),
    C("llama-1b", dtype="float16", batch=32, input_len=512),
    C("qwen3-moe-4l", batch=8, input_len=1024),
    C("llama-8b", batch=8, input_len=2048),
    C("llama-8b", batch=32, input_len=128),
    C("smollm2-135m", cache="static", timeout_s=150),
    C("llama-1b", cache="static", timeout_s=150),
    C("llama-8b", cache="static", timeout_s=180),
    C("qwen3-moe-4l", attn="eager", batch=1, input_len=4096),
]
GPU_CROSSCHECK = GPU_CELLS[0]
GPU_TUNE = {"model": "smollm2-135m", "input_len": 512, "new_tokens": 32, "max_trials": 2, "budget_s": 45}

TINY_CELLS = [
    C("tiny-llama", dtype="float32", batch=2, input_len=32, new_tokens=8),
    C("tiny-moe", dtype="float32", attn="eager", cache="static", input_len=32, new_tokens=8),
    C("tiny-llama", dtype="float32", attn="flash_attention_2", input_len=32, new_tokens=8, note="impossible here"),
    C("tiny-llama", dtype="float32", input_len=32, new_tokens=8, timeout_s=2, note="a 2 s timeout"),
]
TINY_CROSSCHECK = TINY_CELLS[0]
TINY_TUNE = {"model": "tiny-llama", "input_len": 32, "new_tokens": 4, "max_trials": 1, "budget_s": 20}


class Check:
    """The run's state: its folders, clock, child environment and the results file it rewrites."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.t0 = args, time.monotonic()
        self.out = Path(args.out).resolve()
        self.work = Path(args.work or tempfile.mkdtemp(prefix="infertune-gpu-check-")).resolve()
        self.logs, self.models = self.work / "logs", self.work / "models"
        for d in (self.out, self.logs, self.models):
            d.mkdir(parents=True, exist_ok=True)
        src = str(ROOT / "src")
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), src) if p),
            "INFERTUNE_HOME": str(self.work / "home"),
            "INFERTUNE_NO_CALIBRATION": "1",
            "INFERTUNE_NO_ANSWER_CACHE": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
        }
        self.results: dict = {"kind": "gpu-check", "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self.results["args"] = dict(vars(args))
        self.results["work"] = str(self.work)
        self.calibrated = False  # step_calibration: the cells and the tune then run calibrated

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def left(self) -> float:
        return self.args.deadline_s - self.elapsed()

    def run(self, name: str, cmd: list[str], timeout: float, env: dict | None = None) -> dict:
        """A child process in its own session (killed with all it started at `timeout`); its output in logs/."""
        t = time.monotonic()
        out_path, err_path = self.logs / f"{name}.out", self.logs / f"{name}.err"
        with open(out_path, "w") as out, open(err_path, "w") as err:
            p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env or self.env, cwd=ROOT, start_new_session=True)
            try:
                rc: int | None = p.wait(timeout=max(timeout, 1))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                rc = None
        stderr = err_path.read_text(errors="replace")
        return {
            "rc": rc,
            "seconds": time.monotonic() - t,
            "stdout": out_path.read_text(errors="replace"),
            "tail": stderr[-600:],
        }

    def save(self) -> None:
        """The results file, the table and the logs, rewritten whole (atomically) after every step."""
        self.results["elapsed_s"] = round(self.elapsed(), 1)
        tmp = self.out / "gpu_check.json.tmp"
        tmp.write_text(json.dumps(self.results, indent=1, default=str))
        tmp.replace(self.out / "gpu_check.json")
        (self.out / "gpu_check.md").write_text(markdown(self.results))
        with tarfile.open(self.out / "gpu_check_logs.tgz.tmp", "w:gz") as tar:
            tar.add(self.logs, arcname="logs")
        (self.out / "gpu_check_logs.tgz.tmp").replace(self.out / "gpu_check_logs.tgz")


def step_environment(ck: Check) -> None:
    r = ck.run("env", [sys.executable, str(DEVICE_PY), "env"], 60)
    env = (json_lines(r["stdout"]) or [{"error": r["tail"]}])[0]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    env["infertune_commit"] = commit.stdout.strip() or None
    if ck.args.device.startswith("cuda"):
        query = ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]
        smi = subprocess.run(query, capture_output=True, text=True, timeout=30, check=False)
        env["nvidia_smi"] = smi.stdout.strip()
    ck.results["environment"] = env
    ck.save()


def step_build(ck: Check, models: list[str]) -> set[str]:
    dtype = "float32" if ck.args.tiny else "bfloat16"
    cmd = [sys.executable, str(DEVICE_PY), "build", "--out", str(ck.models), "--tok", str(ck.args.tok)]
    r = ck.run("build", [*cmd, "--models", ",".join(models), "--device", ck.args.device, "--dtype", dtype], 240)
    rows = json_lines(r["stdout"])
    ck.results["build"] = {"rc": r["rc"], "seconds": r["seconds"], "models": rows, "tail": r["tail"] if r["rc"] else ""}
    ck.save()
    return {row["model"] for row in rows if row.get("status") == "ok"}


def estimate_cmd(ck: Check, cell: Cell) -> list[str]:
    path = str(ck.models / cell.model)
    shape = ["--dtype", cell.dtype, "--attn", cell.attn, "--kv-cache", cell.cache, "--batch", str(cell.batch)]
    where = ["--cpu"] if ck.args.device == "cpu" else []  # on CUDA: the detected card
    tokens = ["--input-len", str(cell.input_len), "--max-new-tokens", str(cell.new_tokens)]
    return [sys.executable, "-m", "infertune", "estimate", "--model", path, *shape, *tokens, *where, "--format", "json"]


def step_cell(ck: Check, i: int, cell: Cell) -> dict:
    row: dict = {"id": cell.id, "index": i, **cell._asdict(), "status": "skipped"}
    left = ck.left() - ck.args.reserve_s  # what the cells may still use: the reserve is for the steps after them
    timeout = min(cell.timeout_s or ck.args.cell_timeout_s, left)
    if left < 15:
        row["error"] = f"past the cells' share of the deadline ({ck.args.deadline_s - ck.args.reserve_s:.0f} s)"
        return row
    wl = {"model": str(ck.models / cell.model), "prompts": ["Tell me about rivers."], "input_len": cell.input_len}
    wl.update(max_new_tokens=cell.new_tokens, ignore_eos=True, batch=cell.batch, repeats=2, warmup=1)
    wl_path, m_path = ck.work / f"cell{i:02d}.json", ck.work / f"cell{i:02d}.measured.json"
    wl_path.write_text(json.dumps(wl))
    shape = ["--dtype", cell.dtype, "--attn", cell.attn, "--kv-cache", cell.cache, "--device", ck.args.device]
    trial = ["--timeout", str(max(timeout - 10, 1)), "--format", "json", "--output", str(m_path)]
    r = ck.run(
        f"cell{i:02d}-measure",
        [sys.executable, "-m", "infertune", "measure", "--workload", str(wl_path), *shape, *trial],
        timeout,
    )
    row.update(rc=r["rc"], seconds=round(r["seconds"], 1))
    measured = json.loads(m_path.read_text()) if r["rc"] is not None and m_path.is_file() else None
    if measured is None:
        row.update(status="timeout" if r["rc"] is None else "failed", error=r["tail"][-300:] or f"rc {r['rc']}")
    elif measured["status"] != "ok":
        failed = "timeout" if measured["status"] == "timeout" else "failed"  # else oom or error
        row.update(status=failed, error=f"{measured['status']}: {measured.get('error')}"[:300])
    else:
        m, cuda = measured["metrics"], measured["metrics"]["memory_kind"] == "cuda_allocated"
        peak = m["peak_memory_generate_bytes"] - (0 if cuda else m["baseline_memory_bytes"])
        row["status"] = "ok"
        row["measured"] = {
            "ttft_s": m["ttft_s"],
            "tpot_s": m["tpot_s"],
            "peak_bytes": peak,
            "reserved_bytes": m.get("peak_memory_reserved_bytes"),
            "device_process_bytes": m.get("device_memory_process_bytes"),
            "load_s": m["load_s"],
            "output_tokens": m["output_tokens"],
        }
        keep = ("predicted_peak_memory_bytes", "expected_ttft_s", "expected_tpot_s", "expected_basis")
        keep += ("predicted_device_bytes", "measured_device_bytes", "predicted_reserved_bytes")
        row["measure_estimate"] = {k: (measured.get("estimate") or {}).get(k) for k in keep}
    for key, calibrated in (("estimate", False), ("calibrated", True)):
        if calibrated and not ck.calibrated:
            continue
        env = {**ck.env, "INFERTUNE_NO_CALIBRATION": "0" if calibrated else "1"}
        e = ck.run(f"cell{i:02d}-{key}", estimate_cmd(ck, cell), 60, env)
        row[key] = read_estimate(e["stdout"], ck.args.device) if e["rc"] == 0 else {"error": e["tail"][-300:]}
    add_ratios(row)
    return row


def step_crosscheck(ck: Check, cell: Cell, row: dict | None) -> None:
    if row is None or row["status"] != "ok" or ck.left() < 10:
        ck.results["crosscheck"] = {
            "status": "skipped",
            "cell": cell.id,
            "why": "its cell did not run, or past the deadline",
        }
        return
    args = [
        "--model",
        str(ck.models / cell.model),
        "--device",
        ck.args.device,
        "--dtype",
        cell.dtype,
        "--attn",
        cell.attn,
    ]
    args += ["--batch", str(cell.batch), "--input-len", str(cell.input_len), "--new-tokens", str(cell.new_tokens)]
    args += ["--repeats", "1" if ck.args.tiny else "3"]
    r = ck.run("crosscheck", [sys.executable, str(DEVICE_PY), "crosscheck", *args], 40)
    hand = (json_lines(r["stdout"]) or [{"status": "timeout" if r["rc"] is None else "failed", "error": r["tail"]}])[-1]
    m = row["measured"]
    ck.results["crosscheck"] = {
        "cell": cell.id,
        **hand,
        "measure_ttft_s": m["ttft_s"],
        "measure_tpot_s": m["tpot_s"],
        "measure_over_loop_ttft": ratio(m["ttft_s"], hand.get("loop_ttft_s")),
        "measure_over_loop_tpot": ratio(m["tpot_s"], hand.get("loop_tpot_s")),
        "measure_over_generate_tpot": ratio(m["tpot_s"], hand.get("generate_tpot_s")),
    }


def step_calibration(ck: Check) -> None:
    """Before the cells, with its own timeout: when it succeeds (and reads back), everything after it runs calibrated
    (measure's own estimate, the `cal` estimate of each cell, tune); otherwise uncalibrated, never calibrating inside
    a cell's timeout."""
    env = {**ck.env, "INFERTUNE_NO_CALIBRATION": "0"}
    cmd = [sys.executable, str(DEVICE_PY), "calibrate", "--device", ck.args.device]
    r = ck.run("calibration", cmd, ck.args.calibration_timeout_s, env)
    lines = json_lines(r["stdout"])
    done = next((x for x in lines if x.get("status") == "ok"), None)
    status = "ok" if done and done.get("reads_back") else ("timeout" if r["rc"] is None else "failed")
    ck.results["calibration"] = {"status": status, "seconds": r["seconds"], "rc": r["rc"], "result": done}
    ck.results["calibration"].update(phases=[x for x in lines if "phase" in x], tail=r["tail"] if not done else "")
    ck.calibrated = status == "ok"
    ck.env["INFERTUNE_NO_CALIBRATION"] = "0" if ck.calibrated else "1"


def step_tune(ck: Check, spec: dict) -> None:
    if spec["model"] not in ck.results.get("built", []) or ck.left() < 20:
        ck.results["tune"] = {"status": "skipped", "why": "its model was not built, or past the deadline"}
        return
    wl = {"model": str(ck.models / spec["model"]), "prompts": ["Tell me about rivers."], "input_len": spec["input_len"]}
    wl.update(max_new_tokens=spec["new_tokens"], ignore_eos=True, repeats=1, warmup=1)
    (ck.work / "tune.json").write_text(json.dumps(wl))
    cmd = [sys.executable, "-m", "infertune", "tune", str(ck.work / "tune.json"), "--output", str(ck.work / "tune")]
    cmd += ["--max-trials", str(spec["max_trials"]), "--time-budget", str(spec["budget_s"]), "--trial-timeout", "60"]
    cmd += ["--no-serve", "--format", "json"]
    r = ck.run("tune", cmd, ck.args.tune_timeout_s)
    try:
        outcome = json.loads(r["stdout"])
    except ValueError:
        outcome = None
    tune: dict = {"status": "ok" if outcome else ("timeout" if r["rc"] is None else "failed"), "rc": r["rc"]}
    tune.update(seconds=r["seconds"], spec=spec, tail=r["tail"] if not outcome else "")
    if outcome:
        tune["steps"] = [
            {
                "technique": s["technique"] or "baseline",
                "status": s["trial"]["status"],
                "tpot_s": (s["trial"].get("metrics") or {}).get("tpot_s"),
                "ttft_s": (s["trial"].get("metrics") or {}).get("ttft_s"),
                "accepted": s["accepted"],
                "reason": s["reason"][:200],
            }
            for s in outcome["steps"]
        ]
    ck.results["tune"] = tune


def pick(spec: str | None, n: int) -> list[int]:
    """Grid indices from `0-5,9` (None: all)."""
    if not spec:
        return list(range(n))
    out: list[int] = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return [i for i in out if i < n]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for gpu_check.json, gpu_check.md, gpu_check_logs.tgz")
    p.add_argument("--work", help="folder for the models, trials and logs (default: a new temporary folder)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="toy shapes and four cells: the check's own logic, on a CPU")
    p.add_argument("--tok", default=str(ROOT / ".devtok"), help="the embedded model's tokenizer files")
    p.add_argument("--deadline-s", type=float, default=450.0, help="the whole run's time; steps past it are skipped")
    p.add_argument("--reserve-s", type=float, default=110.0, help="of the deadline, kept for the cross-check and tune")
    p.add_argument("--cell-timeout-s", type=float, default=100.0)
    p.add_argument("--calibration-timeout-s", type=float, default=120.0)
    p.add_argument("--tune-timeout-s", type=float, default=70.0)
    p.add_argument("--cells", help="which cells, by index in the grid: 0-5,9 (default: all, in order)")
    p.add_argument("--skip", default="", help="comma-separated steps to leave out: crosscheck, calibration, tune")
    args = p.parse_args()
    if not (Path(args.tok) / "tokenizer.json").is_file():  # the 2026-12-04 smoke's layout, or the prepared folder
        sys.path.insert(0, str(ROOT / "src"))
        from infertune.models import store

        nested = Path(args.tok) / "smollm2"
        args.tok = str(nested if (nested / "tokenizer.json").is_file() else store.models_dir() / "smollm2")
    ck, skip = Check(args), set(args.skip.split(","))
    cells, cross, tune = (
        (TINY_CELLS, TINY_CROSSCHECK, TINY_TUNE) if args.tiny else (GPU_CELLS, GPU_CROSSCHECK, GPU_TUNE)
    )
    step_environment(ck)
    chosen = pick(args.cells, len(cells))
    need = [cells[i].model for i in chosen] + ([] if "tune" in skip else [tune["model"]])
    ck.results["built"] = sorted(step_build(ck, list(dict.fromkeys(need))))
    if "calibration" not in skip:
        step_calibration(ck)
        ck.save()
    rows: list[dict] = []
    ck.results["cells"] = rows
    for i in chosen:
        cell = cells[i]
        if cell.model not in ck.results["built"]:
            rows.append(
                {"id": cell.id, "index": i, **cell._asdict(), "status": "failed", "error": "its model was not built"}
            )
        else:
            rows.append(step_cell(ck, i, cell))
        print(f"[{ck.elapsed():5.0f} s] {rows[-1]['id']}: {rows[-1]['status']}", flush=True)
        ck.results["summary"] = summarise(rows)
        ck.save()
    if "crosscheck" not in skip:
        step_crosscheck(ck, cross, next((r for r in rows if r["id"] == cross.id), None))
        ck.save()
    if "tune" not in skip:
        step_tune(ck, tune)
    ck.results["finished"] = True
    ck.save()
    print(markdown(ck.results))


if __name__ == "__main__":
    main()
