"""Canonical JSON and call signatures against the shared vectors file (generated from the
independent rfc8785 and blake3 packages) and against the Rust CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from undolog_sdk import EncodingError, call_signature, canonical_json

from .conftest import REPO, undolog_binary

VECTORS = json.loads((REPO / "testdata" / "signature-vectors.json").read_text(encoding="utf-8"))


def parse(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise EncodingError(token)

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("case", VECTORS["canonical"], ids=lambda c: c["name"])
def test_canonical_text_matches_the_vectors(case: dict[str, str]) -> None:
    assert canonical_json(parse(case["input"])) == case["canonical"]


@pytest.mark.parametrize("case", VECTORS["rejected"], ids=lambda c: c["name"])
def test_numbers_languages_disagree_about_are_refused(case: dict[str, str]) -> None:
    with pytest.raises(EncodingError, match="string|finite"):
        canonical_json(parse(case["input"]))


@pytest.mark.parametrize("case", VECTORS["signatures"], ids=lambda c: c["name"])
def test_signatures_match_the_vectors(case: dict[str, Any]) -> None:
    args = parse(case["args"])
    identity = {"v": 1, "org": case["org"], "session": case["session"], "tool": case["tool"], "args": args}
    if "step" in case:
        identity["step"] = case["step"]
    assert canonical_json(identity) == case["canonical"]
    assert call_signature(case["org"], case["session"], case["tool"], args, case.get("step")) == case["signature"]


@pytest.mark.parametrize("case", VECTORS["signatures"], ids=lambda c: c["name"])
def test_signatures_match_the_rust_cli(case: dict[str, Any]) -> None:
    command = [str(undolog_binary()), "signature", "--org", case["org"], "--session", case["session"],
               "--tool", case["tool"], "--args", case["args"]]
    if "step" in case:
        command += ["--step", str(case["step"])]
    rust = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()
    assert rust == call_signature(case["org"], case["session"], case["tool"], parse(case["args"]), case.get("step"))


def test_encoded_python_values_sign_like_their_json_in_rust() -> None:
    import datetime as dt
    import uuid
    from decimal import Decimal

    args = {"amount": Decimal("12.50"), "at": dt.datetime(2026, 11, 30, 13, 0, tzinfo=dt.timezone(dt.timedelta(hours=1))),
            "id": uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF")}
    json_args = '{"amount":"12.50","at":"2026-11-30T12:00:00Z","id":"6f9619ff-8b86-d011-b42d-00c04fc964ff"}'
    rust = subprocess.run(
        [str(undolog_binary()), "signature", "--org", "acme", "--session", "s", "--tool", "t", "--args", json_args,
         "--step", "4"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert call_signature("acme", "s", "t", args, 4) == rust
