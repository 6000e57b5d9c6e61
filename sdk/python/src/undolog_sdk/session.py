"""``UndoLogSession``: one agent session against the gateway. It names the session (a UUID unless
given), numbers the calls made in it (the step index that makes a rerun of the same script replay
instead of run again), and carries the HTTP client. Use it with ``async with`` or ``with``."""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
import time
import uuid
from types import TracebackType
from typing import Any

import httpx

from . import flow
from .errors import GatewayUnavailableError, UndoLogError
from .flow import CallContext, Flow, Http, Reply, Run, Sleep, UndoReport
from .tool import ToolSpec

__all__ = ["UndoLogSession"]

DEFAULT_URL = "http://127.0.0.1:8080"


class UndoLogSession:
    """A session of tool calls recorded by the UndoLog gateway.

    ``base_url`` defaults to ``$UNDOLOG_URL`` or ``http://127.0.0.1:8080``, ``api_key`` to
    ``$UNDOLOG_API_KEY`` (none: the gateway's open mode, org ``default``). When the gateway cannot
    be reached, a call raises :class:`GatewayUnavailableError` and the tool does not run, unless
    ``fail_open=True``: then it runs unrecorded, with a warning. With ``approval_timeout`` set, a
    call held for approval waits that many seconds for the decision instead of raising
    :class:`AwaitingApprovalError` at once.
    """

    def __init__(
        self,
        org_id: str = "default",
        session_id: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        fail_open: bool = False,
        approval_timeout: float | None = None,
        timeout: float = 90.0,
    ) -> None:
        self.org_id = org_id
        self.session_id = session_id or str(uuid.uuid4())
        self.base_url = (base_url or os.environ.get("UNDOLOG_URL") or DEFAULT_URL).rstrip("/")
        self.fail_open = fail_open
        self.approval_timeout = approval_timeout
        self._api_key = api_key if api_key is not None else os.environ.get("UNDOLOG_API_KEY")
        self._timeout = timeout
        self._next_step = 0
        self._lock = threading.Lock()
        self._async_client: httpx.AsyncClient | None = None
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._sync_client: httpx.Client | None = None

    def __repr__(self) -> str:  # never shows the key
        return f"UndoLogSession(org_id={self.org_id!r}, session_id={self.session_id!r}, base_url={self.base_url!r})"

    @property
    def steps_taken(self) -> int:
        """How many calls this session object has numbered so far."""
        return self._next_step

    # -- context managers --------------------------------------------------------------------

    async def __aenter__(self) -> UndoLogSession:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __enter__(self) -> UndoLogSession:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def aclose(self) -> None:
        if self._async_client is not None:
            await self._async_client.aclose()
            self._async_client = None
        self.close()

    def close(self) -> None:
        if self._sync_client is not None:
            self._sync_client.close()
            self._sync_client = None

    # -- public operations --------------------------------------------------------------------

    async def undo(self, *, attempts: int = 3, backoff: float = 0.2) -> UndoReport:
        """Undoes the session: the local compensations of its committed compensable calls run
        newest first, each reported to the gateway; one that raises is retried ``attempts`` times
        with doubling pauses from ``backoff`` seconds. Raises :class:`UndoFailedError` at a
        compensation that keeps failing (the session is then ``compensation_failed``; call again
        to resume from that step)."""
        report: UndoReport = await self._drive_async(flow.undo(self.session_id, attempts, backoff))
        return report

    def undo_sync(self, *, attempts: int = 3, backoff: float = 0.2) -> UndoReport:
        """:meth:`undo` for synchronous code."""
        report: UndoReport = self._drive_sync(flow.undo(self.session_id, attempts, backoff))
        return report

    async def wait_for_approval(self, approval_id: str, timeout: float = 60.0) -> str:
        """Waits for a person's decision; answers ``approved``, ``denied`` or ``expired``. Raises
        :class:`TimeoutError` if it is still pending after ``timeout`` seconds."""
        return _decided(await self._drive_async(flow.wait_for_approval(approval_id, timeout)), approval_id)

    def wait_for_approval_sync(self, approval_id: str, timeout: float = 60.0) -> str:
        """:meth:`wait_for_approval` for synchronous code."""
        return _decided(self._drive_sync(flow.wait_for_approval(approval_id, timeout)), approval_id)

    # -- what decorated tools call ------------------------------------------------------------

    async def _call_async(self, spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return await self._drive_async(flow.call(self._context(), spec, args, kwargs))

    def _call_sync(self, spec: ToolSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self._drive_sync(flow.call(self._context(), spec, args, kwargs))

    def _context(self) -> CallContext:
        with self._lock:
            step = self._next_step
            self._next_step += 1
        return CallContext(self.session_id, step, self.base_url, self.fail_open, self.approval_timeout)

    # -- drivers ----------------------------------------------------------------------------

    async def _drive_async(self, steps: Flow) -> Any:
        answer: Any = None
        error: BaseException | None = None
        while True:
            try:
                op = steps.send(answer) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value
            answer, error = None, None
            try:
                if isinstance(op, Http):
                    answer = await self._send_async(op)
                elif isinstance(op, Run):
                    answer = op.fn(*op.args, **op.kwargs)
                    if inspect.isawaitable(answer):
                        answer = await answer
                elif isinstance(op, Sleep):
                    await asyncio.sleep(op.seconds)
            except Exception as e:
                error = e

    def _drive_sync(self, steps: Flow) -> Any:
        answer: Any = None
        error: BaseException | None = None
        while True:
            try:
                op = steps.send(answer) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value
            answer, error = None, None
            try:
                if isinstance(op, Http):
                    answer = self._send_sync(op)
                elif isinstance(op, Run):
                    answer = op.fn(*op.args, **op.kwargs)
                    if inspect.isawaitable(answer):
                        answer = _run_awaitable(answer)
                elif isinstance(op, Sleep):
                    time.sleep(op.seconds)
            except Exception as e:
                error = e

    def _headers(self) -> dict[str, str]:
        headers = {"X-UndoLog-Org-Id": self.org_id}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    async def _send_async(self, op: Http) -> Reply:
        loop = asyncio.get_running_loop()
        if self._async_client is not None and self._async_loop is not loop:
            # A client is bound to its event loop; a session reused under another loop (a second
            # asyncio.run) gets a new one.
            self._async_client = None
        if self._async_client is None:
            self._async_loop = loop
            self._async_client = httpx.AsyncClient(
                base_url=self.base_url, headers=self._headers(), timeout=self._timeout
            )
        try:
            response = await self._async_client.request(op.method, op.path, json=op.body)
        except httpx.TransportError as e:
            raise self._unreachable(e) from e
        return _reply(response)

    def _send_sync(self, op: Http) -> Reply:
        if self._sync_client is None:
            self._sync_client = httpx.Client(
                base_url=self.base_url, headers=self._headers(), timeout=self._timeout
            )
        try:
            response = self._sync_client.request(op.method, op.path, json=op.body)
        except httpx.TransportError as e:
            raise self._unreachable(e) from e
        return _reply(response)

    def _unreachable(self, e: Exception) -> GatewayUnavailableError:
        return GatewayUnavailableError(
            f"cannot reach the UndoLog gateway at {self.base_url} ({type(e).__name__}: {e}); "
            "check that `undolog serve` runs there and that base_url (or UNDOLOG_URL) names it. "
            "Fail-closed: nothing was run (pass fail_open=True to run tools unrecorded instead)"
        )


def _reply(response: httpx.Response) -> Reply:
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = {"error": response.text[:500]}
    return Reply(response.status_code, body)


def _decided(state: str | None, approval_id: str) -> str:
    if state is None:
        raise TimeoutError(f"approval {approval_id} is still pending; wait longer or ask a person")
    return state


def _run_awaitable(awaitable: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:

        async def wait() -> Any:
            return await awaitable

        return asyncio.run(wait())
    raise UndoLogError(
        "an async compensation cannot run from undo_sync() inside a running event loop; "
        "use `await session.undo()`"
    )
