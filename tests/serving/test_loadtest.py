"""The load generator against a fake OpenAI-compatible server on loopback (streams SSE, or fails on demand)."""

import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import Started
from infertune.core.errors import UserError
from infertune.serving.loadtest import loadtest

TOKENS = 5
DELAY = 0.01  # between streamed tokens


class FakeOpenAI(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fail_every = 0  # every Nth completion answers 500
    calls = 0

    def log_message(self, *a):
        pass

    def do_GET(self):
        body = json.dumps({"data": [{"id": "fake"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls += 1
        if self.fail_every and type(self).calls % self.fail_every == 0:
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        n = min(TOKENS, req.get("max_tokens", TOKENS))
        for i in range(n):
            time.sleep(DELAY)
            delta = {"choices": [{"delta": {"content": f"t{i} "}}]}
            self._chunk(f"data: {json.dumps(delta)}\n\n")
        self._chunk("data: [DONE]\n\n")
        self._chunk("")

    def _chunk(self, text: str):
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


@pytest.fixture()
def server():
    FakeOpenAI.calls, FakeOpenAI.fail_every = 0, 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_levels_report_ttft_itl_percentiles_and_throughput(server):
    res = loadtest(server, "fake", [1, 4], 8, None, 16, max_ttft=5.0, max_tpot=1.0)
    assert [lv.concurrency for lv in res.levels] == [1, 4]
    for lv in res.levels:
        assert lv.requests_ok == 8 and lv.requests_failed == 0
        assert lv.ttft_s.p50 > DELAY * 0.5 and lv.itl_s.p50 >= DELAY * 0.5  # the server waits DELAY per token
        assert lv.ttft_s.p50 <= lv.ttft_s.p95 <= lv.ttft_s.p99
        assert lv.output_tokens_per_s > 0 and lv.meets_slo
    assert res.knee_concurrency == 4 and res.kind == "measured"


def test_failures_are_counted_not_hidden_and_slo_knee(server):
    FakeOpenAI.fail_every = 4
    res = loadtest(server, None, [2], 8, None, 16, max_ttft=1e-6, max_tpot=None)
    lv = res.levels[0]
    assert lv.requests_ok + lv.requests_failed == 8 and lv.requests_failed == 2 and lv.errors == {"http-500": 2}
    assert lv.meets_slo is False and res.knee_concurrency is None


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_nothing_listening_is_one_clear_error():
    with pytest.raises(UserError, match="nothing is listening"):
        loadtest(f"http://127.0.0.1:{_free_port()}", None, [1], 1, None, 4, None, None)
    r = subprocess.run(
        [sys.executable, "-m", "infertune", "loadtest", "--url", f"http://127.0.0.1:{_free_port()}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "nothing is listening" in r.stderr


def test_cli_json_and_report(server, tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "infertune",
            "loadtest",
            "--url",
            server,
            "--concurrency",
            "1,2",
            "--requests",
            "4",
            "--format",
            "json",
            "--output",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    lv = d["levels"][1]
    for key in ("ttft_s", "itl_s"):
        assert set(lv[key]) >= {"p50", "p95", "p99"}
    assert lv["requests_ok"] == 4 and lv["requests_failed"] == 0 and lv["output_tokens_per_s"] > 0
    assert_load_report(tmp_path, d)


def test_load_report_with_an_slo_reads_for_people_in_a_real_browser(server, tmp_path, browser):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "infertune",
            "loadtest",
            "--url",
            server,
            "--concurrency",
            "1,2,3",
            "--requests",
            "3",
            "--max-ttft",
            "5",
            "--output",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "load.md").read_text()
    assert "max_ttft_s" not in md and "{" not in md  # the SLO in words, never a dict
    assert "Highest load meeting the SLO (TTFT p95 under 5.00 s): concurrency 3." in md
    seen = browser.layout(tmp_path / "load.html", width=1280)
    assert seen["wide"] == [] and seen["scroll_width"] <= seen["viewport"]
    assert len(seen["images"]) == 2 and all(i["loaded"] for i in seen["images"])
    assert 0 < seen["verdict_top"] < seen["first_chart_top"]


def assert_load_report(folder, result):
    """load.json holds the printed result; load.md its table; load.html both plots, embedded."""
    saved = json.loads((folder / "load.json").read_text())
    assert saved["levels"] == result["levels"]
    md = (folder / "load.md").read_text()
    assert md.count("\n| ") == 1 + len(result["levels"])  # header + one row per level
    page = (folder / "load.html").read_text()
    assert page.count("data:image/svg+xml;base64,") == 2
    assert "Throughput versus load" in page and "Latency versus load" in page
    assert page.index("id='verdict'") < page.index("<figure")


def test_serve_trial_runs_transformers_serve_on_loopback_and_leaves_nothing_behind(tiny_model, tmp_path):
    run = Started(
        [
            sys.executable,
            "-m",
            "infertune",
            "serve-trial",
            "--model",
            str(tiny_model),
            "--continuous-batching",
            "--cb-block-size",
            "32",
            "--cb-num-blocks",
            "64",
            "--concurrency",
            "1,2",
            "--requests",
            "2",
            "--max-new-tokens",
            "4",
            "--output",
            str(tmp_path),
            "--format",
            "json",
        ]
    )
    stdout, stderr = run.communicate(timeout=600)
    assert run.proc.returncode == 0, stderr[-2000:]
    d = json.loads(stdout)
    assert "--host 127.0.0.1" in d["command"] and (tmp_path / "server.log").exists()
    assert "--continuous-batching --cb-block-size 32 --cb-num-blocks 64" in d["command"]
    assert [lv["requests_ok"] for lv in d["load"]["levels"]] == [2, 2]
    assert_load_report(tmp_path, d["load"])
    assert run.seen and run.alive() == []  # the server it started (and anything that started) is gone


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_interrupted_serve_trial_leaves_no_server_behind(tiny_model, tmp_path, sig):
    import signal

    run = Started(
        [
            sys.executable,
            "-m",
            "infertune",
            "serve-trial",
            "--model",
            str(tiny_model),
            "--requests",
            "50",
            "--max-new-tokens",
            "64",
            "--output",
            str(tmp_path),
        ],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # as from a terminal
    proc = run.proc
    log = tmp_path / "server.log"
    deadline = time.time() + 120
    while time.time() < deadline and not (log.exists() and log.stat().st_size > 0):
        time.sleep(0.2)
    time.sleep(2)
    assert any("transformers" in " ".join(p.cmdline()) for p in run.alive())  # the server it started runs
    proc.send_signal(getattr(signal, sig))
    run.communicate(timeout=60)
    assert proc.returncode == 130
    time.sleep(1)
    assert run.alive() == []  # only the processes this test started are looked at


def test_open_loop_rates(server):
    res = loadtest(server, None, [1], 6, None, 16, max_ttft=5.0, max_tpot=None, rates=[5.0, 50.0])
    assert [lv.rate for lv in res.levels] == [5.0, 50.0]
    assert all(lv.requests_ok == 6 and lv.requests_failed == 0 for lv in res.levels)
    slow, fast = res.levels
    assert slow.duration_s > fast.duration_s  # arrivals spread over ~1 s at 5/s, ~0.1 s at 50/s
    assert fast.concurrency >= slow.concurrency >= 1  # more in flight when offered faster
    assert res.knee_rate == 50.0 and res.knee_concurrency is None
    r = subprocess.run(
        [sys.executable, "-m", "infertune", "loadtest", "--url", server, "--rate", "fast"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "--rate" in r.stderr
