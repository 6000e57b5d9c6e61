"""With API keys, the session sends its key and org; the gateway takes the org from the key."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from decimal import Decimal

import httpx
import pytest

from undolog_sdk import GatewayError, UndoLogSession, call_signature

from .conftest import Gateway, start, undolog_binary
from .test_gateway import RAN, charge


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, str]]:
    binary = undolog_binary()
    directory = tmp_path_factory.mktemp("keyed")
    store = f"sqlite://{directory / 'undolog.db'}"
    key = subprocess.run(
        [str(binary), "keys", "create", "--org", "acme", "--store", store],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    process, url = start(binary, store, directory / "gateway.log")
    try:
        yield Gateway(url=url, store=store, binary=binary), key
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_a_keyed_session_records_under_its_org(keyed: tuple[Gateway, str]) -> None:
    gateway, key = keyed
    sid, account = f"keyed-{uuid.uuid4()}", f"acct-{uuid.uuid4().hex[:8]}"
    for _ in range(2):
        async with UndoLogSession(org_id="acme", session_id=sid, base_url=gateway.url, api_key=key) as session:
            await charge(account, Decimal("7"), _session=session)
    assert RAN[f"charge:{account}:7"] == 1
    effects = httpx.get(f"{gateway.url}/v1/sessions/{sid}/effects",
                        headers={"Authorization": f"Bearer {key}"}).json()
    assert effects[0]["org"] == "acme"
    expected = call_signature("acme", sid, "charge", {"account": account, "amount": Decimal("7")}, 0)
    assert effects[0]["signature"] == expected, "the SDK's signature is the gateway's"


async def test_a_wrong_org_or_no_key_is_refused_before_anything_runs(keyed: tuple[Gateway, str]) -> None:
    gateway, key = keyed
    account = f"acct-{uuid.uuid4().hex[:8]}"
    async with UndoLogSession(org_id="globex", base_url=gateway.url, api_key=key) as session:
        with pytest.raises(GatewayError) as refused:
            await charge(account, Decimal("1"), _session=session)
    assert refused.value.status == 403
    async with UndoLogSession(org_id="acme", base_url=gateway.url, api_key="") as session:
        with pytest.raises(GatewayError) as refused:
            await charge(account, Decimal("1"), _session=session)
    assert refused.value.status == 401
    assert RAN[f"charge:{account}:1"] == 0
