"""Serving engines: the managed environments, the flag translation, and a server's whole process tree stopped.

The vLLM tests start the real engine from its managed environment; they are skipped, with the reason, where
`infertune engines install vllm` has not been run (it takes minutes and gigabytes)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import psutil
import pytest

from infertune.config import vllm_flags
from infertune.errors import UserError
from infertune.serving import engines
from infertune.serving.server import ServeProcess


def test_vllm_flags_translate_the_workload():
    args = vllm_flags(dtype="float16", max_model_len=4096, max_num_seqs=16, quantization="awq", tp=2,
                             kv_cache_dtype="fp8")
    pairs = dict(zip(args[::2], args[1::2]))
    assert pairs == {"--dtype": "float16", "--max-model-len": "4096", "--max-num-seqs": "16",
                     "--tensor-parallel-size": "2", "--quantization": "awq", "--kv-cache-dtype": "fp8"}
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
    r = subprocess.run([sys.executable, "-m", "infertune", "engines", "list", "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    import json

    rows = json.loads(r.stdout)
    assert [row["name"] for row in rows] == ["vllm", "sglang"]
    assert all(set(row) >= {"name", "version", "path", "ok"} for row in rows)


def test_stop_ends_the_whole_tree_even_a_worker_in_its_own_session(tmp_path):
    """A stand-in server that answers /health and starts a worker with setsid (as engines' workers may):
    stopping the server leaves neither alive."""
    script = tmp_path / "server.py"
    script.write_text(textwrap.dedent("""
        import http.server, subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
            def log_message(self, *a): pass
        http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
    """))
    server = ServeProcess([], tmp_path / "log", ready_timeout_s=60, name="stand-in",
                          command=lambda host, port: [sys.executable, str(script), host, str(port)])
    with server:
        tree = [psutil.Process(server.proc.pid), *psutil.Process(server.proc.pid).children(recursive=True)]
        assert len(tree) == 2 and server.startup_s is not None
        assert server.peak_rss_bytes() > 0
    assert not [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


vllm_installed = pytest.mark.skipif(not engines.info("vllm").ok,
                                    reason="vLLM is not installed here (run `infertune engines install vllm`)")


@pytest.mark.engine
@vllm_installed
def test_vllm_serves_the_embedded_model_under_load_and_leaves_nothing_behind(demo_model, tmp_path):
    from infertune.serving.trial import run_serve_trial

    flags = vllm_flags(dtype="bfloat16", max_model_len=1024, max_num_seqs=4)
    t = run_serve_trial(str(demo_model), flags, tmp_path / "vllm.log", [1, 4], 8, 16, engine="vllm")
    assert t.engine == "vllm" and t.startup_s and t.startup_s > 0
    assert [lv.concurrency for lv in t.load.levels] == [1, 4]
    assert all(lv.requests_ok == 8 and lv.requests_failed == 0 and lv.output_tokens_per_s > 0
               for lv in t.load.levels)
    assert t.peak_memory_bytes and t.peak_memory_bytes > 200 * 2**20  # the model alone is ~270 MB in bf16
    assert t.shell(str(demo_model)).startswith("vllm serve ")
    assert not psutil.Process().children(recursive=True)  # the engine's whole tree is gone
