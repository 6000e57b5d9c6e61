"""The SDK against the real gateway binary: replay on rerun, approvals, undo as a saga, failures,
and fail-closed / fail-open when the gateway is away."""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
import uuid
from decimal import Decimal
from typing import Any

import pytest

from undolog_sdk import (
    AwaitingApprovalError,
    CallFailedError,
    GatewayUnavailableError,
    RejectedError,
    ToolTier,
    UndoFailedError,
    UndoLogSession,
    undolog_tool,
)

from .conftest import Gateway, free_port

RAN: collections.Counter[str] = collections.Counter()
UNDONE: list[str] = []
BROKEN_REFUNDS: set[str] = set()


@dataclasses.dataclass
class Receipt:
    id: uuid.UUID
    amount: Decimal


@undolog_tool(tier=ToolTier.READ_ONLY)
async def balance(account: str) -> int:
    RAN[f"balance:{account}"] += 1
    return 100


def refund(receipt: Receipt, *, account: str, amount: Decimal) -> str:
    if account in BROKEN_REFUNDS:
        raise RuntimeError("card network down")
    UNDONE.append(f"refund:{account}:{amount}")
    assert isinstance(receipt, Receipt) and receipt.amount == amount
    return "refunded"


@undolog_tool(tier=ToolTier.COMPENSABLE, compensation=refund)
async def charge(account: str, amount: Decimal) -> Receipt:
    RAN[f"charge:{account}:{amount}"] += 1
    return Receipt(uuid.uuid4(), amount)


async def cancel(result: dict[str, Any], *, hotel: str) -> None:
    UNDONE.append(f"cancel:{hotel}")


@undolog_tool(tier=ToolTier.COMPENSABLE, compensation=cancel)
async def book(hotel: str) -> dict[str, Any]:
    RAN[f"book:{hotel}"] += 1
    return {"booking": hotel.upper()}


@undolog_tool(tier=ToolTier.IRREVERSIBLE)
async def send_email(to: str, subject: str) -> str:
    RAN[f"email:{to}"] += 1
    return "sent"


@undolog_tool(tier=ToolTier.COMPENSABLE, compensation=lambda result, **_: UNDONE.append("unship"))
async def ship(order: str) -> str:
    RAN[f"ship:{order}"] += 1
    raise RuntimeError("warehouse closed")


FLAKY_FAILURES: collections.Counter[str] = collections.Counter()


def release(result: None, *, seat: str) -> None:
    if FLAKY_FAILURES[seat] > 0:
        FLAKY_FAILURES[seat] -= 1
        raise ConnectionError("seat service busy")
    UNDONE.append(f"release:{seat}")


@undolog_tool(tier=ToolTier.COMPENSABLE, compensation=release)
def reserve(seat: str) -> None:
    RAN[f"reserve:{seat}"] += 1


def sync_refund(result: str, *, item: str, quantity: int) -> None:
    UNDONE.append(f"return:{item}")


@undolog_tool(tier=ToolTier.COMPENSABLE, compensation=sync_refund)
def buy(item: str, quantity: int = 1) -> str:
    RAN[f"buy:{item}:{quantity}"] += 1
    return f"bought {quantity} {item}"


def new_session_id() -> str:
    return f"test-{uuid.uuid4()}"


async def checkout(session: UndoLogSession, account: str) -> list[Any]:
    return [
        await balance(account, _session=session),
        await charge(account, Decimal("12.50"), _session=session),
        await book(f"hotel-{account}", _session=session),
        await charge(account, Decimal("3.00"), _session=session),
    ]


async def test_running_the_same_session_script_twice_executes_each_side_effect_once(gateway: Gateway) -> None:
    sid, account = new_session_id(), f"acct-{uuid.uuid4().hex[:8]}"
    async with UndoLogSession(session_id=sid, base_url=gateway.url) as session:
        first = await checkout(session, account)
        assert session.steps_taken == 4
    async with UndoLogSession(session_id=sid, base_url=gateway.url) as session:
        second = await checkout(session, account)
    assert second == first, "the replay is the recorded result, decoded to the declared types"
    assert isinstance(second[1], Receipt)
    assert RAN[f"charge:{account}:12.50"] == 1
    assert RAN[f"charge:{account}:3.00"] == 1
    assert RAN[f"book:hotel-{account}"] == 1
    assert RAN[f"balance:{account}"] == 2, "read-only tools run every time"
    effects = gateway.admin("GET", f"/v1/sessions/{sid}/effects").json()
    assert [(e["tool"], e["state"]) for e in effects] == [
        ("balance", "committed"), ("charge", "committed"), ("book", "committed"),
        ("charge", "committed"), ("balance", "committed"),
    ]
    assert effects[1]["args"] == {"account": account, "amount": "12.50"}


def test_sync_tools_and_the_sync_session_replay_too(gateway: Gateway) -> None:
    sid, item = new_session_id(), f"lamp-{uuid.uuid4().hex[:6]}"
    for _ in range(2):
        with UndoLogSession(session_id=sid, base_url=gateway.url) as session:
            assert buy(item, _session=session) == f"bought 1 {item}"
            assert buy(item, quantity=2, _session=session) == f"bought 2 {item}"
    assert (RAN[f"buy:{item}:1"], RAN[f"buy:{item}:2"]) == (1, 1)
    with UndoLogSession(session_id=sid, base_url=gateway.url) as session:
        report = session.undo_sync()
    assert report.state == "compensated"
    assert UNDONE[-2:] == [f"return:{item}", f"return:{item}"]


async def test_an_irreversible_call_waits_for_approval_then_runs_once(gateway: Gateway) -> None:
    sid, to = new_session_id(), f"{uuid.uuid4().hex[:8]}@example.com"
    async with UndoLogSession(session_id=sid, base_url=gateway.url) as session:
        with pytest.raises(AwaitingApprovalError) as held:
            await send_email(to, "hello", _session=session)
    assert RAN[f"email:{to}"] == 0, "nothing runs before the decision"
    approval = gateway.admin("GET", f"/v1/approvals/{held.value.approval_id}").json()
    assert approval["state"] == "pending"
    assert gateway.admin("POST", f"/v1/approvals/{held.value.approval_id}/approve", json={}).status_code == 200

    for _ in range(2):  # the rerun runs it; the one after replays
        async with UndoLogSession(session_id=sid, base_url=gateway.url) as session:
            assert await session.wait_for_approval(held.value.approval_id, timeout=5) == "approved"
            assert await send_email(to, "hello", _session=session) == "sent"
    assert RAN[f"email:{to}"] == 1


async def test_a_session_can_wait_for_the_decision_in_line(gateway: Gateway) -> None:
    sid, to = new_session_id(), f"{uuid.uuid4().hex[:8]}@example.com"

    def approve_when_asked(decision: str, body: dict[str, str]) -> None:
        for _ in range(200):
            pending = gateway.admin("GET", "/v1/approvals?status=pending").json()
            mine = [a for a in pending if a["session"] == sid]
            if mine:
                gateway.admin("POST", f"/v1/approvals/{mine[0]['id']}/{decision}", json=body)
                return
            time.sleep(0.05)

    person = threading.Thread(target=approve_when_asked, args=("approve", {}))
    person.start()
    async with UndoLogSession(session_id=sid, base_url=gateway.url, approval_timeout=10) as session:
        assert await send_email(to, "inline", _session=session) == "sent"
    person.join()
    assert RAN[f"email:{to}"] == 1

    person = threading.Thread(target=approve_when_asked, args=("deny", {"reason": "not to the CEO"}))
    person.start()
    async with UndoLogSession(session_id=sid, base_url=gateway.url, approval_timeout=10) as session:
        assert await send_email(to, "inline", _session=session) == "sent"  # replayed
        with pytest.raises(RejectedError, match="not to the CEO"):
            await send_email(to, "again", _session=session)
    person.join()
    assert RAN[f"email:{to}"] == 1


async def test_undo_runs_local_compensations_newest_first(gateway: Gateway) -> None:
    sid, account = new_session_id(), f"acct-{uuid.uuid4().hex[:8]}"
    async with UndoLogSession(session_id=sid, base_url=gateway.url) as session:
        await checkout(session, account)
        with pytest.raises(AwaitingApprovalError):
            await send_email("x@example.com", "receipt", _session=session)
        before = len(UNDONE)
        report = await session.undo()
    assert UNDONE[before:] == [f"refund:{account}:3.00", f"cancel:hotel-{account}", f"refund:{account}:12.50"]
    assert report.state == "compensated"
    assert [s.tool for s in report.steps] == ["charge", "book", "charge"]
    effects = gateway.admin("GET", f"/v1/sessions/{sid}/effects").json()
    assert [e["state"] for e in effects if e["tool"] != "balance"][:3] == ["compensated"] * 3
    sessions = {s["id"]: s for s in gateway.admin("GET", "/v1/sessions").json()}
    assert sessions[sid]["state"] == "compensated"
    async with UndoLogSession(session_id=sid, base_url=gateway.url) as session:
        with pytest.raises(RejectedError, match="compensated"):
            await charge(account, Decimal("1"), _session=session)


async def test_a_failing_compensation_stops_the_undo_and_a_second_undo_resumes(gateway: Gateway) -> None:
    sid, account = new_session_id(), f"acct-{uuid.uuid4().hex[:8]}"
    BROKEN_REFUNDS.add(account)
    async with UndoLogSession(session_id=sid, base_url=gateway.url) as session:
        await book(f"inn-{account}", _session=session)
        await charge(account, Decimal("5"), _session=session)
        with pytest.raises(UndoFailedError, match="card network down") as failed:
            await session.undo(backoff=0.01)
        assert failed.value.report.state == "compensation_failed"
        assert f"cancel:inn-{account}" not in UNDONE, "nothing after the failing step ran"
        BROKEN_REFUNDS.discard(account)
        report = await session.undo()
    assert report.state == "compensated"
    assert UNDONE[-2:] == [f"refund:{account}:5", f"cancel:inn-{account}"]


async def test_a_failing_tool_is_recorded_and_not_run_again(gateway: Gateway) -> None:
    sid, order = new_session_id(), f"order-{uuid.uuid4().hex[:8]}"
    async with UndoLogSession(session_id=sid, base_url=gateway.url) as session:
        with pytest.raises(RuntimeError, match="warehouse closed"):
            await ship(order, _session=session)
    async with UndoLogSession(session_id=sid, base_url=gateway.url) as session:
        with pytest.raises(CallFailedError, match="warehouse closed"):
            await ship(order, _session=session)
    assert RAN[f"ship:{order}"] == 1
    effects = gateway.admin("GET", f"/v1/sessions/{sid}/effects").json()
    assert [e["state"] for e in effects] == ["failed"]


async def test_an_unreachable_gateway_fails_closed_unless_told_to_fail_open() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    account = f"acct-{uuid.uuid4().hex[:8]}"
    async with UndoLogSession(base_url=dead) as session:
        with pytest.raises(GatewayUnavailableError, match="cannot reach the UndoLog gateway") as e:
            await charge(account, Decimal("1"), _session=session)
    assert dead in str(e.value)
    assert RAN[f"charge:{account}:1"] == 0
    async with UndoLogSession(base_url=dead, fail_open=True) as session:
        with pytest.warns(RuntimeWarning, match="unrecorded"):
            receipt = await charge(account, Decimal("1"), _session=session)
    assert receipt.amount == Decimal("1")
    assert RAN[f"charge:{account}:1"] == 1


async def test_arguments_that_cannot_be_signed_are_refused_before_anything_runs(gateway: Gateway) -> None:
    async with UndoLogSession(base_url=gateway.url) as session:
        with pytest.raises(ValueError, match="as a string"):
            await book(2**60 + 1, _session=session)  # type: ignore[arg-type]


def test_a_flaky_compensation_is_retried_before_the_undo_gives_up(gateway: Gateway) -> None:
    seat = f"seat-{uuid.uuid4().hex[:6]}"
    FLAKY_FAILURES[seat] = 2
    with UndoLogSession(base_url=gateway.url) as session:
        reserve(seat, _session=session)
        report = session.undo_sync(attempts=3, backoff=0.01)
    assert report.state == "compensated"
    assert UNDONE[-1] == f"release:{seat}"
    assert FLAKY_FAILURES[seat] == 0


def test_one_session_object_serves_sync_code_and_several_event_loops(gateway: Gateway) -> None:
    import asyncio

    hotel = f"hotel-{uuid.uuid4().hex[:6]}"
    with UndoLogSession(base_url=gateway.url) as session:
        first = asyncio.run(book(hotel, _session=session))
        second = asyncio.run(book(hotel + "-annex", _session=session))
        reserve(hotel, _session=session)
    assert (first, second) == ({"booking": hotel.upper()}, {"booking": (hotel + "-annex").upper()})
    assert session.steps_taken == 3
