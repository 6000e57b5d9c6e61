"""The examples, run as a user runs them, twice with one session id against the real gateway: the
plain asyncio script (then its undo), the LangGraph agent and the OpenAI Agents SDK agent. The
frameworks live in their own virtual environment under target/, made once by examples/setup.sh."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from .conftest import REPO, Gateway

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="session")
def frameworks_python() -> Path:
    venv = REPO / "target" / "sdk-examples-venv"
    setup = subprocess.run([str(EXAMPLES / "setup.sh"), str(venv)], capture_output=True, text=True)
    if setup.returncode != 0:
        pytest.fail(f"examples/setup.sh failed; run it by hand to see why:\n{setup.stderr[-3000:]}", pytrace=False)
    return venv / "bin" / "python"


def run(python: Path | str, script: str, gateway: Gateway, *args: str) -> list[str]:
    done = subprocess.run(
        [str(python), str(EXAMPLES / script), *args],
        cwd=EXAMPLES,
        env={**os.environ, "UNDOLOG_URL": gateway.url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout}\n{done.stderr}"
    ledger: list[str] = json.loads(done.stdout.strip().splitlines()[-1])["ledger"]
    return ledger


def test_the_plain_asyncio_script_charges_once_then_undoes_newest_first(gateway: Gateway) -> None:
    sid = f"example-{uuid.uuid4()}"
    assert run(sys.executable, "plain_asyncio.py", gateway, sid) == ["charge alice 12.50", "charge alice 3.00"]
    second = run(sys.executable, "plain_asyncio.py", gateway, sid, "--undo")
    assert [line.split(" (")[0] for line in second] == ["refund alice 3.00", "refund alice 12.50"]


@pytest.mark.parametrize(
    ("script", "charges"),
    [
        ("langgraph_agent.py", ["charge alice 12.50", "charge bob 3.00"]),
        ("openai_agents.py", ["charge carol 20.00"]),
    ],
)
def test_a_framework_agent_rerun_replays_its_tool_calls(
    script: str, charges: list[str], gateway: Gateway, frameworks_python: Path
) -> None:
    sid = f"example-{uuid.uuid4()}"
    assert sorted(run(frameworks_python, script, gateway, sid)) == sorted(charges)
    assert run(frameworks_python, script, gateway, sid) == [], "the rerun charges nobody"
