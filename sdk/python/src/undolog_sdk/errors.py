"""What the SDK raises. Every message says what to do next."""

from __future__ import annotations

from typing import Any

__all__ = [
    "AwaitingApprovalError",
    "CallFailedError",
    "EncodingError",
    "GatewayError",
    "GatewayUnavailableError",
    "RejectedError",
    "UndoFailedError",
    "UndoLogError",
]


class UndoLogError(Exception):
    """The base of every error the SDK raises."""


class EncodingError(UndoLogError, ValueError):
    """A value cannot be encoded as (or decoded from) the SDK's JSON encoding."""


class GatewayUnavailableError(UndoLogError):
    """The gateway could not be reached or could not record the call. Fail-closed: the tool did
    not run, unless ``in_doubt`` is true: then it may have run (``result`` is its result when it
    ran here) and its outcome was not recorded; effect ``effect_id`` is in doubt for an operator,
    so do not simply retry."""

    def __init__(
        self,
        message: str,
        *,
        effect_id: str | None = None,
        result: Any = None,
        in_doubt: bool = False,
    ) -> None:
        super().__init__(message)
        self.effect_id = effect_id
        self.result = result
        self.in_doubt = in_doubt


class GatewayError(UndoLogError):
    """The gateway refused the request (bad input, credentials, unknown id, conflict). ``code``
    is the gateway's machine-readable name for what went wrong (``still_running``,
    ``idempotency_key_reused``…), when it gave one."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(f"gateway answered {status}: {message}")
        self.status = status
        self.message = message
        self.code = code


class AwaitingApprovalError(UndoLogError):
    """The call is held for a person's decision; it did not run. Approve it, then run the same
    call again (same session, same step: rerun the session script), or let the session wait with
    ``approval_timeout=…``, or call ``session.wait_for_approval(approval_id)``."""

    def __init__(
        self, *, tool: str, approval_id: str, effect_id: str, expires_at: int | None, step: int
    ) -> None:
        super().__init__(
            f"{tool} (step {step}) awaits a person's approval {approval_id}; approve it "
            f"(POST /v1/approvals/{approval_id}/approve), then run the same call again"
        )
        self.tool = tool
        self.approval_id = approval_id
        self.effect_id = effect_id
        self.expires_at = expires_at
        self.step = step


class RejectedError(UndoLogError):
    """The gateway refused to run the call: denied by a person, a closed session, or an identical
    call in doubt. ``reason`` says which; ``in_doubt`` is true for the last (the identical call,
    effect ``effect_id``, may have run: an operator records whether it did)."""

    def __init__(self, *, tool: str, effect_id: str | None, reason: str, in_doubt: bool = False) -> None:
        super().__init__(f"{tool} was not run: {reason}")
        self.tool = tool
        self.effect_id = effect_id
        self.reason = reason
        self.in_doubt = in_doubt


class CallFailedError(UndoLogError):
    """An identical call failed before; its failure is replayed rather than run again.
    ``effect_id`` is the failed effect."""

    def __init__(self, message: str, *, effect_id: str | None = None) -> None:
        super().__init__(message)
        self.effect_id = effect_id


class UndoFailedError(UndoLogError):
    """A compensation failed: the session is ``compensation_failed`` and the failing step is kept
    for a person. ``report`` lists what ran."""

    def __init__(self, report: Any) -> None:
        failed = report.steps[-1] if report.steps else None
        what = f"{failed.tool} (effect {failed.effect_id}): {failed.error}" if failed else "?"
        super().__init__(
            f"undo of session {report.session} stopped at {what}; fix the cause, then call undo() "
            "again to resume from that step"
        )
        self.report = report
