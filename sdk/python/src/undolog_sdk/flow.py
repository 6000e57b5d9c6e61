"""The SDK's protocol as sans-IO generators: each flow yields what should happen (an HTTP
request, running a function, a pause) and is sent the answer. The session drives a flow with
async IO or with blocking IO, so both share one implementation of every rule."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from .canonical import canonical_json
from .encoding import JSON, from_json, to_json
from .errors import (
    AwaitingApprovalError,
    CallFailedError,
    EncodingError,
    GatewayError,
    GatewayUnavailableError,
    RejectedError,
    UndoFailedError,
)
from .tool import ToolSpec, registered_tool

__all__ = ["UndoReport", "UndoStep"]


@dataclass(frozen=True)
class Http:
    method: str
    path: str
    body: JSON = None


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any


@dataclass(frozen=True)
class Run:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class Sleep:
    seconds: float


Op = Http | Run | Sleep
Flow = Generator[Op, Any, Any]


@dataclass(frozen=True)
class CallContext:
    """What a call needs to know about its session."""

    session_id: str
    step: int
    base_url: str
    fail_open: bool
    approval_timeout: float | None


@dataclass(frozen=True)
class UndoStep:
    effect_id: str
    tool: str
    compensated: bool
    error: str | None = None


@dataclass(frozen=True)
class UndoReport:
    """What an undo did: ``state`` is ``compensated`` (or ``compensation_failed``, raised as
    :class:`UndoFailedError`); ``steps`` in the order they ran, newest effect first."""

    session: str
    state: str
    steps: list[UndoStep] = field(default_factory=list)
    not_undoable: list[str] = field(default_factory=list)


def call(ctx: CallContext, spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Flow:
    """One call of a decorated tool: intercept, then run and commit or fail, or replay, or hold."""
    arguments = to_json(spec.arguments(args, kwargs))
    canonical_json(arguments)  # refuse here what the gateway would refuse, before anything runs
    body: JSON = {
        "session_id": ctx.session_id,
        "tool": spec.name,
        "arguments": arguments,
        "step": ctx.step,
        "tier": spec.tier.value,
        "compensation": spec.compensation_record(),
        "idempotent": spec.idempotent,
        "requires_approval": spec.requires_approval,
    }
    try:
        answer = checked((yield Http("POST", "/v1/effects", body)), call_failed=True)
    except GatewayUnavailableError as e:
        if not ctx.fail_open:
            raise
        warnings.warn(
            f"{e}; running {spec.name} unrecorded because the session fails open",
            RuntimeWarning,
            stacklevel=2,
        )
        return (yield Run(spec.fn, args, kwargs))
    deadline = time.monotonic() + (ctx.approval_timeout or 0)
    while answer["outcome"] == "awaiting_approval":
        held = AwaitingApprovalError(
            tool=spec.name,
            approval_id=answer["approval_id"],
            effect_id=answer["effect_id"],
            expires_at=answer.get("expires_at"),
            step=ctx.step,
        )
        if ctx.approval_timeout is None:
            raise held
        left = deadline - time.monotonic()
        if left <= 0 or (yield from wait_for_approval(held.approval_id, left)) is None:
            raise held
        answer = checked((yield Http("POST", "/v1/effects", body)), call_failed=True)
    outcome = answer["outcome"]
    if outcome == "replay":
        return from_json(answer["result"], spec.hints.get("return", Any))
    if outcome == "rejected":
        raise RejectedError(
            tool=spec.name,
            effect_id=answer.get("effect_id"),
            reason=answer["reason"],
            in_doubt=answer.get("in_doubt") is True,
        )
    if outcome != "execute":
        raise GatewayError(200, f"unknown outcome {outcome!r}; upgrade the SDK")
    effect_id: str = answer["effect_id"]
    # The call is this process's to settle, and only its: the gateway refuses a commit or a
    # failure without the token it handed out with the effect.
    lease_token: str = answer["lease_token"]
    try:
        result = yield Run(spec.fn, args, kwargs)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        failed: JSON = {"error": error, "lease_token": lease_token}
        yield from record(ctx, effect_id, f"/v1/effects/{effect_id}/fail", failed, None)
        raise
    try:
        encoded = to_json(result)
        canonical_json(encoded)
        problem = None
    except EncodingError as e:
        encoded, problem = {"unencodable_result": repr(result)[:2000]}, e
    committed: JSON = {"result": encoded, "lease_token": lease_token}
    yield from record(ctx, effect_id, f"/v1/effects/{effect_id}/commit", committed, result)
    if problem is not None:
        raise EncodingError(
            f"{spec.name} ran and is recorded (undo will compensate it), but its result cannot be "
            f"encoded: {problem}"
        )
    return result


def record(ctx: CallContext, effect_id: str, path: str, body: JSON, result: Any) -> Flow:
    """Reports an outcome, retrying a gateway that is briefly away: the tool has run."""
    pause = 0.2
    for attempt in range(4):
        try:
            checked((yield Http("POST", path, body)))
            return None
        except GatewayUnavailableError as e:
            if attempt == 3:
                if ctx.fail_open:
                    warnings.warn(f"{e}; the outcome of effect {effect_id} is not recorded", RuntimeWarning, stacklevel=2)
                    return None
                raise GatewayUnavailableError(
                    f"the tool ran but its outcome could not be recorded ({e}); effect {effect_id} "
                    f"will be listed in doubt: record what happened with POST "
                    f"/v1/effects/{effect_id}/resolve",
                    effect_id=effect_id,
                    result=result,
                    in_doubt=True,
                ) from e
            yield Sleep(pause)
            pause *= 2
    return None


def wait_for_approval(approval_id: str, timeout: float) -> Flow:
    """Polls an approval until it is decided (answers its state) or ``timeout`` passes (None)."""
    deadline = time.monotonic() + timeout
    pause = 0.05
    while True:
        approval = checked((yield Http("GET", f"/v1/approvals/{approval_id}")))
        if approval["state"] != "pending":
            return approval["state"]
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        yield Sleep(min(pause, left))
        pause = min(pause * 2, 1.0)


def undo(session_id: str, attempts: int = 3, backoff: float = 0.2) -> Flow:
    """Undoes a session with the local compensations, newest first, reporting each step. A
    compensation that raises is tried ``attempts`` times, pausing ``backoff`` seconds (doubled
    each time) in between, before the undo stops there."""
    plan = checked((yield Http("POST", f"/v1/sessions/{session_id}/undo/begin", {})))
    state: str = plan["state"]
    claim: str = plan["claim"]  # this undo's hold on the session: every step report names it
    steps: list[UndoStep] = []
    for step in plan["steps"]:
        effect_id, tool = step["effect_id"], step["tool"]
        spec = registered_tool(tool)
        error: str | None = None
        outcome: Any = None
        if spec is None or spec.compensation is None:
            error = (
                f"no compensation for tool {tool!r} is registered in this process; import the "
                "module that defines it, then call undo() again"
            )
        else:
            args = {k: from_json(v, spec.hints.get(k, Any)) for k, v in step["args"].items()}
            result = from_json(step["result"], spec.hints.get("return", Any))
            pause = backoff
            for attempt in range(1, max(attempts, 1) + 1):
                try:
                    outcome = yield Run(spec.compensation, (result,), args)
                    error = None
                    break
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    if attempt < attempts:
                        yield Sleep(pause)
                        pause *= 2
        if error is None:
            try:
                report_body: JSON = {"outcome": "compensated", "result": to_json(outcome), "claim": claim}
            except EncodingError:
                report_body = {"outcome": "compensated", "result": repr(outcome)[:2000], "claim": claim}
        else:
            report_body = {"outcome": "failed", "error": error, "claim": claim}
        path = f"/v1/sessions/{session_id}/undo/steps/{effect_id}"
        progress = checked((yield Http("POST", path, report_body)))
        steps.append(UndoStep(effect_id=effect_id, tool=tool, compensated=error is None, error=error))
        state = progress["state"]
        if error is not None:
            break
    report = UndoReport(session_id, state, steps, list(plan["not_undoable"]))
    if state == "compensation_failed":
        raise UndoFailedError(report)
    return report


def checked(reply: Reply, *, call_failed: bool = False) -> Any:
    """The body of a successful reply; otherwise the error that says what happened."""
    if 200 <= reply.status < 300:
        return reply.body
    body = reply.body if isinstance(reply.body, dict) else {}
    message = body.get("error", str(reply.body))
    code = body.get("code")
    # Only a replayed failure is one: "still running" and the other conflicts are not.
    if reply.status == 409 and call_failed and code == "call_failed":
        raise CallFailedError(message, effect_id=body.get("effect_id"))
    if reply.status >= 500:
        raise GatewayUnavailableError(
            f"the gateway could not record the call ({reply.status}: {message})",
            effect_id=body.get("effect_id"),
            in_doubt=body.get("in_doubt") is True,
        )
    raise GatewayError(reply.status, message, code)
