"""UndoLog's Python SDK: record every call of a local tool as an effect in UndoLog's durable log,
replay repeated calls, hold irreversible ones for a person, and undo a session as a saga.

    @undolog_tool(tier=ToolTier.COMPENSABLE, compensation=refund)
    async def charge(card: str, cents: int) -> dict: ...

    async with UndoLogSession(session_id="order-42") as session:
        await charge("tok_1", 500, _session=session)
        await session.undo()

No agent framework is imported here: the decorator works in LangGraph, the OpenAI Agents SDK,
FastAPI or a plain script alike.
"""

from .canonical import call_signature, canonical_json
from .encoding import from_json, to_json
from .errors import (
    AwaitingApprovalError,
    CallFailedError,
    EncodingError,
    GatewayError,
    GatewayUnavailableError,
    RejectedError,
    UndoFailedError,
    UndoLogError,
)
from .flow import UndoReport, UndoStep
from .session import UndoLogSession
from .tool import ToolSpec, ToolTier, undolog_tool

__all__ = [
    "AwaitingApprovalError",
    "CallFailedError",
    "EncodingError",
    "GatewayError",
    "GatewayUnavailableError",
    "RejectedError",
    "ToolSpec",
    "ToolTier",
    "UndoFailedError",
    "UndoLogError",
    "UndoLogSession",
    "UndoReport",
    "UndoStep",
    "call_signature",
    "canonical_json",
    "from_json",
    "to_json",
    "undolog_tool",
]
