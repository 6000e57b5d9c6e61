"""Fixtures: the real `undolog` binary started on a free port with a fresh embedded store."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]


def undolog_binary() -> Path:
    binary = Path(os.environ.get("UNDOLOG_BIN", REPO / "target" / "debug" / "undolog"))
    if not binary.is_file():
        pytest.fail(
            f"the undolog binary is missing at {binary}: build it with `cargo build -p undolog-cli` "
            "or point UNDOLOG_BIN at it",
            pytrace=False,
        )
    return binary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Gateway:
    url: str
    store: str
    binary: Path

    def admin(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        return httpx.request(method, self.url + path, timeout=30, **kwargs)  # type: ignore[arg-type]


def start(binary: Path, store: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    for _ in range(5):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with log.open("ab") as out:
            process = subprocess.Popen(
                [str(binary), "serve", "--listen", f"127.0.0.1:{port}", "--store", store],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    return process, url
            except httpx.TransportError:
                time.sleep(0.05)
        process.kill()
        process.wait()
    pytest.fail(f"the gateway did not start; its log: {log.read_text()[-2000:]}", pytrace=False)


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    binary = undolog_binary()
    directory = tmp_path_factory.mktemp("gateway")
    store = f"sqlite://{directory / 'undolog.db'}"
    process, url = start(binary, store, directory / "gateway.log")
    try:
        yield Gateway(url=url, store=store, binary=binary)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
