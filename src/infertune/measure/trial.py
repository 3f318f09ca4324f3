"""Run one trial in a child process: an OOM, crash, hang or garbage output becomes the trial's status.

The child runs in its own session (process group), so a timeout or Ctrl-C kills it and anything it
started (compile workers, tokenizer threads) in one signal; it also dies with this process if this one is
killed (measure/lifeline.py), and a later trial removes the folder such a death left behind. The parent never
imports torch for a trial and never touches the GPU, so its memory does not grow with trials.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from infertune.core.config import InferenceConfig
from infertune.core.workload import Workload
from infertune.measure import lifeline
from infertune.measure.machine import Watch
from infertune.measure.results import Status, TrialResult, TrialSpec
from infertune.measure.zygote import base_env, current
from infertune.models.hub import revision_of

Event = dict[str, Any]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _child_env(folder: Path) -> dict[str, str]:
    return {**base_env(), lifeline.PARENT_ENV: lifeline.token(), lifeline.TRIAL_DIR_ENV: str(folder)}


def _start(python: str, worker: list[str], tmp: Path, log: IO[bytes], log_file: Path, ranks: bool) -> Any:
    """The trial's child: forked from the warm launcher when a `warm_start` block is open (same interpreter, one
    rank; measure/zygote.py), else a fresh interpreter. Either runs in a session of its own."""
    env = _child_env(tmp)
    zygote = None if ranks or python != sys.executable else current()
    if zygote is not None and zygote.serves(env):
        with contextlib.suppress(RuntimeError, OSError, TimeoutError):  # a launcher that died: start cold
            return zygote.spawn(worker[2:], env, log_file)
    return subprocess.Popen(
        [python, *worker], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True
    )


def _kill_group(proc: Any) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def classify_exit(returncode: int) -> tuple[Status, str]:
    """Status and message for a child that died without writing its result."""
    if returncode < 0:
        sig = signal.Signals(-returncode)
        if sig == signal.SIGKILL:  # nobody else sends SIGKILL to our child: the kernel's OOM killer did
            return "oom", "killed by SIGKILL (the kernel's out-of-memory killer)"
        return "error", f"crashed with {sig.name}"
    return "error", f"exited with code {returncode} without a result"


def run_trial(
    config: InferenceConfig,
    workload: Workload,
    model_path: str | Path,
    timeout_s: float = 900.0,
    on_event: Callable[[Event], None] | None = None,
    python: str = sys.executable,
    reference_text: str | None = None,
    logprobs_path: str | Path | None = None,
    memory_limit_bytes: int | None = None,
) -> TrialResult:
    """Measure `config` on `workload` in a fresh child; always returns a TrialResult.

    `python` is the child's interpreter: another environment's python measures another library stack.
    `reference_text`: also score it teacher-forced (metrics.reference_nll; log-probs to `logprobs_path`).
    `memory_limit_bytes`: the most the child may allocate after start-up; past it the trial is "oom".
    """
    started = time.perf_counter()
    base = {
        "config": config,
        "workload": workload,
        "model_path": str(model_path),
        "model_revision": revision_of(model_path),
    }
    extra = {
        "reference_text": reference_text,
        "logprobs_path": str(logprobs_path) if logprobs_path else None,
        "memory_limit_bytes": memory_limit_bytes,
    }
    lifeline.sweep()  # folders of trials whose parent was killed
    tmp = lifeline.trial_dir()
    try:
        with Watch() as watch:  # how busy the machine was meanwhile: the trial says so
            result = _run(config, workload, model_path, timeout_s, on_event, python, base, extra, tmp, started)
        result.machine = watch.result
        return result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(
    config: InferenceConfig,
    workload: Workload,
    model_path: str | Path,
    timeout_s: float,
    on_event: Callable[[Event], None] | None,
    python: str,
    base: dict,
    extra: dict,
    tmp: Path,
    started: float,
) -> TrialResult:
    phase = {"now": "starting"}
    spec_file, result_file, log_file = (Path(tmp, "spec.json"), Path(tmp, "result.json"), Path(tmp, "child.log"))
    spec_file.write_text(TrialSpec(**base, **extra).model_dump_json(), encoding="utf-8")
    with open(log_file, "wb") as log:
        worker = ["-m", "infertune.measure.worker", str(spec_file), str(result_file)]
        if config.tp_size > 1:  # one process per rank, rendezvous on loopback; rank 0 writes the result
            worker = [
                "-m",
                "torch.distributed.run",
                "--nproc-per-node",
                str(config.tp_size),
                "--master-addr",
                "127.0.0.1",
                "--master-port",
                str(free_port()),
                *worker,
            ]
        proc = _start(python, worker, tmp, log, log_file, config.tp_size > 1)
        garbage: deque[str] = deque(maxlen=5)

        def read_events() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.decode("utf-8", errors="replace").strip()
                try:
                    event = json.loads(line)
                    assert isinstance(event, dict) and "event" in event
                except (ValueError, AssertionError):
                    if line:
                        garbage.append(line)
                    continue
                phase["now"] = event.get("phase", phase["now"])
                if on_event is not None:
                    on_event(event)

        reader = threading.Thread(target=read_events, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
        except BaseException:  # Ctrl-C: take the child down with us, then let the caller decide
            _kill_group(proc)
            raise
        reader.join(timeout=5)
    elapsed = time.perf_counter() - started
    log_tail = _tail(log_file)
    if timed_out:
        return TrialResult(
            **base,
            status="timeout",
            error=f"timed out after {timeout_s:g} s (during {phase['now']})",
            duration_s=elapsed,
            log_tail=log_tail,
        )
    try:
        data = json.loads(result_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        status, message = classify_exit(proc.returncode)
        if garbage:
            message += f"; last output: {garbage[-1][:200]}"
        return TrialResult(**base, status=status, error=message, duration_s=elapsed, log_tail=log_tail)
    return TrialResult(**base, **data, duration_s=elapsed, log_tail=log_tail if data.get("status") != "ok" else None)
