"""Serving engines: the managed environments, the flag translation, and a server's whole process tree stopped.

The vLLM tests start the real engine from its managed environment; they are skipped, with the reason, where
`infertune engines install vllm` has not been run (it takes minutes and gigabytes)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import psutil
import pytest

from infertune.core.config import vllm_flags
from infertune.core.errors import UserError
from infertune.serving import engines
from infertune.serving.server import ServeProcess


def test_vllm_flags_translate_the_workload():
    args = vllm_flags(
        dtype="float16", max_model_len=4096, max_num_seqs=16, quantization="awq", tp=2, kv_cache_dtype="fp8"
    )
    pairs = dict(zip(args[::2], args[1::2]))
    assert pairs == {
        "--dtype": "float16",
        "--max-model-len": "4096",
        "--max-num-seqs": "16",
        "--tensor-parallel-size": "2",
        "--quantization": "awq",
        "--kv-cache-dtype": "fp8",
    }
    # vLLM serves no "auto"-from-fp32 checkpoints on CPU: bf16; bitsandbytes has one vLLM name
    cpu = vllm_flags(dtype="float32", max_model_len=512, max_num_seqs=1, quantization="bnb-nf4")
    assert cpu[:2] == ["--dtype", "bfloat16"] and cpu[-2:] == ["--quantization", "bitsandbytes"]
    assert "--tensor-parallel-size" not in cpu and "--kv-cache-dtype" not in cpu


def test_an_engine_that_is_not_installed_is_listed_with_its_install_command(infertune_home):
    listed = {e.name: e for e in engines.installed()}
    assert set(listed) == {"vllm", "sglang"}
    assert all(not e.ok and e.version is None for e in listed.values())
    assert listed["vllm"].install == "infertune engines install vllm"
    with pytest.raises(UserError, match="engines install vllm"):
        engines.server_command("vllm", "/m", [])
    with pytest.raises(UserError, match="unknown engine 'tgi'"):
        engines.engine("tgi")


def test_cli_engines_list_json(infertune_home):
    r = subprocess.run(
        [sys.executable, "-m", "infertune", "engines", "list", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    import json

    rows = json.loads(r.stdout)
    assert [row["name"] for row in rows] == ["vllm", "sglang"]
    assert all(set(row) >= {"name", "version", "path", "ok"} for row in rows)


def test_stop_ends_the_whole_tree_even_a_worker_in_its_own_session(tmp_path):
    """A stand-in server that answers /health and starts a worker with setsid (as engines' workers may):
    stopping the server leaves neither alive."""
    script = tmp_path / "server.py"
    script.write_text(
        textwrap.dedent("""
        import http.server, subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
            def log_message(self, *a): pass
        http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
    """)
    )
    server = ServeProcess(
        [],
        tmp_path / "log",
        ready_timeout_s=60,
        name="stand-in",
        command=lambda host, port: [sys.executable, str(script), host, str(port)],
    )
    with server:
        tree = [psutil.Process(server.proc.pid), *psutil.Process(server.proc.pid).children(recursive=True)]
        assert len(tree) == 2 and server.startup_s is not None
        assert server.peak_rss_bytes() > 0
    assert not [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


vllm_installed = pytest.mark.skipif(
    not engines.info("vllm").ok, reason="vLLM is not installed here (run `infertune engines install vllm`)"
)


@pytest.mark.engine
@vllm_installed
def test_vllm_serves_the_embedded_model_under_load_and_leaves_nothing_behind(demo_model, tmp_path):
    from infertune.serving.trial import run_serve_trial

    flags = vllm_flags(dtype="bfloat16", max_model_len=1024, max_num_seqs=4)
    t = run_serve_trial(str(demo_model), flags, tmp_path / "vllm.log", [1, 4], 8, 16, engine="vllm")
    assert t.engine == "vllm" and t.startup_s and t.startup_s > 0
    assert [lv.concurrency for lv in t.load.levels] == [1, 4]
    assert all(lv.requests_ok == 8 and lv.requests_failed == 0 and lv.output_tokens_per_s > 0 for lv in t.load.levels)
    assert t.peak_memory_bytes and t.peak_memory_bytes > 200 * 2**20  # the model alone is ~270 MB in bf16
    assert t.shell(str(demo_model)).startswith("vllm serve ")
    assert not psutil.Process().children(recursive=True)  # the engine's whole tree is gone


@pytest.mark.engine
@vllm_installed
def test_tune_serve_stage_measures_vllm_beside_transformers_and_ships_the_measured_choice(demo_model, tmp_path):
    """The serve stage of a real tune run on the embedded model: transformers serve both ways and vLLM on the same
    load, each with its start-up time and peak memory; the ship-it command is the chosen variant's, and the run
    is evidence the advisor's serving-engine move carries. Which one wins is the machine's business (no timing
    is asserted): only that the choice, the report and the advice agree."""
    from infertune import api, report
    from infertune.core.workload import Workload
    from infertune.probe.model import profile_model
    from infertune.techniques import Setup
    from infertune.tuning.loop import tune
    from infertune.tuning.run import Run, TuneSpec
    from infertune.tuning.serve_stage import serve_stage

    wl = Workload(model="demo", max_new_tokens=16, concurrency=4, warmup=0)
    run = Run.create(
        tmp_path / "r",
        TuneSpec(
            model="demo",
            model_path=str(demo_model),
            workload=wl,
            start=Setup(dtype="bfloat16"),
            objective="throughput",
            max_trials=1,
            serve=True,
        ),
    )
    facts = api.host_facts(run.spec(), profile_model(demo_model))
    steps = tune(run, facts)
    served = serve_stage(run, facts, steps[0])
    assert [v.engine for v in served] == ["transformers", "transformers", "vllm", "sglang"]
    vllm = served[2]
    assert vllm.status == "ok" and vllm.trial.startup_s > 0 and vllm.trial.peak_memory_bytes > 200 * 2**20
    assert vllm.flags[vllm.flags.index("--max-num-seqs") + 1] == "4" and len(vllm.rounds) == 3
    assert all(lv.requests_failed == 0 for v in served[:3] for lv in v.trial.load.levels)
    r = report.write(run.path, run.spec(), steps, facts, served=run.serve_steps())
    chosen = [row for row in r["served"] if row["chosen"]]
    assert len(chosen) == 1 and r["best"]["serve"] == chosen[0]["command"] and r["best"]["serve_measured"]
    (e,) = r["serving_engine"]
    assert e["engine"] == "vllm" and e["throughput_ratio"] > 0 and e["startup_s"] == vllm.trial.startup_s
    a = api.advise(model="demo", measured=run.path, concurrency=4)
    moved = [x for x in a.recommendations if x.technique == "serving-engine" and x.measured]
    refused = [x for x in a.rejected if x.technique == "serving-engine"]
    assert (
        (moved and moved[0].measured[0].engine == "vllm")
        if e["better"]
        else refused[0].reasons[0].startswith("measured here: vllm")
    )
    assert not psutil.Process().children(recursive=True)  # every server's whole tree is gone
