"""``@undolog_tool``: declares a function's tier and compensation and routes its calls through
the gateway. Works on async and sync functions; a call takes ``_session=session``."""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .encoding import _hints

if TYPE_CHECKING:
    from .session import UndoLogSession

__all__ = ["ToolSpec", "ToolTier", "registered_tool", "undolog_tool"]

F = TypeVar("F", bound=Callable[..., Any])


class ToolTier(str, enum.Enum):
    """How a tool's effects are treated: see the gateway's tier table."""

    READ_ONLY = "read_only"  # runs every time, logged, nothing to undo
    COMPENSABLE = "compensable"  # runs once per session and step, replayed, undone by compensation
    IRREVERSIBLE = "irreversible"  # runs once, only after a person's approval; cannot be undone


@dataclass(frozen=True)
class ToolSpec:
    """A decorated function and what it declares."""

    name: str
    fn: Callable[..., Any]
    tier: ToolTier
    compensation: Callable[..., Any] | None
    requires_approval: bool
    idempotent: bool
    signature: inspect.Signature = field(repr=False)
    hints: dict[str, Any] = field(repr=False)

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments by parameter name, defaults applied (what is recorded)."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        out: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            kind = self.signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                out.update(value)
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                out[name] = list(value)
            else:
                out[name] = value
        return out

    def compensation_record(self) -> dict[str, Any] | None:
        """What the gateway records as the compensation: a function local to this process (the
        gateway's own undo never runs it, and never mistakes it for an upstream tool)."""
        if self.compensation is None:
            return None
        name = getattr(self.compensation, "__qualname__", repr(self.compensation))
        return {"kind": "local", "function": name}


_REGISTRY: dict[str, ToolSpec] = {}


def registered_tool(name: str) -> ToolSpec | None:
    """The decorated tool of that name in this process, for undo."""
    return _REGISTRY.get(name)


def undolog_tool(
    *,
    tier: ToolTier,
    compensation: Callable[..., Any] | None = None,
    name: str | None = None,
    requires_approval: bool = False,
    idempotent: bool = False,
) -> Callable[[F], F]:
    """Records every call of the decorated function as an effect.

    ``compensation`` undoes one call of a compensable tool; it is called as
    ``compensation(result, **arguments)`` with the call's recorded arguments and result (decoded
    by the tool's annotations), and may be async or sync. It must tolerate being asked to undo
    something already undone.
    """
    tier = ToolTier(tier)
    if compensation is not None and tier is not ToolTier.COMPENSABLE:
        raise ValueError(f"only compensable tools take a compensation, not {tier.value} ones")

    def decorate(fn: F) -> F:
        spec = ToolSpec(
            name=name or fn.__name__,
            fn=fn,
            tier=tier,
            compensation=compensation,
            requires_approval=requires_approval,
            idempotent=idempotent,
            signature=inspect.signature(fn),
            hints=_hints(fn),
        )
        _REGISTRY[spec.name] = spec
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def call_async(*args: Any, _session: UndoLogSession, **kwargs: Any) -> Any:
                return await _session._call_async(spec, args, kwargs)

            wrapper: Any = call_async
        else:

            @functools.wraps(fn)
            def call_sync(*args: Any, _session: UndoLogSession, **kwargs: Any) -> Any:
                return _session._call_sync(spec, args, kwargs)

            wrapper = call_sync
        wrapper.undolog_tool = spec
        return wrapper  # type: ignore[no-any-return]

    return decorate
