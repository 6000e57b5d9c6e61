"""An MCP interceptor server (SEP-2624) in plain Python: a spending limit on tool calls.

    python3 spend_limit.py           speaks MCP on stdin/stdout (newline-delimited JSON-RPC)

It offers one validator, `example/spend-limit`, on `tools/call` requests. With the config
`{"maxAmount": 100}` it refuses (severity error) a call whose `arguments.amount` is above 100, and
warns (severity warn, which does not block) above 80% of it. The config is described by the
descriptor's `configSchema`, so a host checks it before the first call: UndoLog's gateway refuses
to start with `config = { maxAmount = "lots" }`.

Use it from the gateway:

    [[interceptors]]
    command = "python3"
    args = ["examples/interceptors/spend_limit.py"]
    config = { maxAmount = 100 }

Standard library only; any Python 3.9+ works. Diagnostics go to stderr.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

PROTOCOL_VERSION = "2025-11-25"
EXTENSION = "io.modelcontextprotocol/interceptors"
NAME = "example/spend-limit"

DESCRIPTOR = {
    "name": NAME,
    "version": "0.1.0",
    "description": "Refuses tools/call requests whose arguments.amount is above maxAmount.",
    "type": "validation",
    "hooks": [{"events": ["tools/call"], "phase": "request"}],
    "configSchema": {
        "type": "object",
        "properties": {"maxAmount": {"type": "number", "minimum": 0}},
        "required": ["maxAmount"],
        "additionalProperties": False,
    },
}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def finding(message: str, severity: str) -> dict[str, Any]:
    return {"path": "/arguments/amount", "message": message, "severity": severity}


def check(params: dict[str, Any]) -> dict[str, Any]:
    """The verdict on one tools/call request: a flat SEP-2624 validation result."""
    started = time.monotonic()
    limit = (params.get("config") or {}).get("maxAmount")
    amount = ((params.get("payload") or {}).get("arguments") or {}).get("amount")
    result: dict[str, Any] = {"interceptor": NAME, "type": "validation", "phase": params["phase"], "valid": True}
    if isinstance(amount, (int, float)) and isinstance(limit, (int, float)):
        if amount > limit:
            result.update(valid=False, severity="error",
                          messages=[finding(f"amount {amount} is above the limit of {limit}; ask for less", "error")])
        elif amount > 0.8 * limit:
            result.update(severity="warn",
                          messages=[finding(f"amount {amount} is close to the limit of {limit}", "warn")])
    result["durationMs"] = int((time.monotonic() - started) * 1000)
    return result


def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "initialize":
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {"extensions": {EXTENSION: {"supportedEvents": ["tools/call"]}}},
            "serverInfo": {"name": "spend-limit", "version": "0.1.0"},
        }
    if method == "ping":
        return {}
    if method == "interceptors/list":
        event = params.get("event")
        listed = event in (None, "tools/call")
        return {"interceptors": [DESCRIPTOR] if listed else []}
    if method == "interceptor/invoke":
        if params.get("name") != NAME:
            raise LookupError(f"no interceptor named {params.get('name')!r}; call interceptors/list")
        return check(params)
    raise NotImplementedError(method)


def main() -> None:
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            send({"id": None, "error": {"code": -32700, "message": "not JSON"}})
            continue
        if "id" not in msg or "method" not in msg:
            continue  # notifications and stray responses
        try:
            send({"id": msg["id"], "result": answer(msg["method"], msg.get("params") or {})})
        except LookupError as exc:
            send({"id": msg["id"], "error": {"code": -32602, "message": str(exc)}})
        except NotImplementedError as exc:
            send({"id": msg["id"], "error": {"code": -32601, "message": f"method {exc} not found"}})
        except Exception as exc:  # a crash answers, so the host can fail closed at once
            print(f"spend_limit: {exc!r}", file=sys.stderr, flush=True)
            send({"id": msg["id"], "error": {"code": -32603, "message": f"interceptor crashed: {exc}"}})


if __name__ == "__main__":
    main()
