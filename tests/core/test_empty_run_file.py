"""An empty run file (no bytes, or a mapping with no keys) is refused in one line, exit 2, before any work:
from the CLI, the API and MCP alike. It used to run `advise` on defaults, which its author did not ask for."""

import asyncio
import subprocess
import sys

import pytest

from infertune import api
from infertune.core.errors import UserError

EMPTY = [
    ("run.yaml", ""),
    ("run.yaml", "{}\n"),
    ("run.yml", "# only a comment\n"),
    ("run.toml", ""),
    ("run.json", "{}"),
]


@pytest.mark.parametrize(("name", "text"), EMPTY)
def test_api_refuses_an_empty_run_file(tmp_path, name, text):
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(UserError, match="is empty"):
        api.advise(workload=f)


def test_cli_refuses_an_empty_run_file_in_one_line(tmp_path):
    f = tmp_path / "run.yaml"
    f.write_text("")
    r = subprocess.run(
        [sys.executable, "-m", "infertune", "advise", str(f)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ") and "is empty" in r.stderr, r.stderr


def test_mcp_refuses_an_empty_run_file(tmp_path):
    pytest.importorskip("mcp")
    from mcp.server.mcpserver.exceptions import ToolError

    from infertune.mcp_server import server

    f = tmp_path / "run.json"
    f.write_text("{}")
    with pytest.raises(ToolError, match="is empty"):
        asyncio.run(server().call_tool("advise", {"workload": str(f)}))


def test_a_run_file_with_one_field_is_still_read(tmp_path):
    from infertune.core.workload import read_run_file

    f = tmp_path / "run.yaml"
    f.write_text("input_len: 512\n")
    assert read_run_file(f) == ({"input_len": 512}, {})
