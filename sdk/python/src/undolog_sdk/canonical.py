"""RFC 8785 canonical JSON and the UndoLog call signature, identical to the Rust implementation.

Keys are sorted by UTF-16 code units, strings use the minimal escaping of ECMAScript's
``JSON.stringify``, and numbers are written as ECMAScript writes an IEEE-754 double (``1.0`` →
``1``, ``1e21`` → ``1e+21``, ``-0`` → ``0``). An integer whose double would be written with other
digits (past 2^53, such as ``9007199254740993``) and numbers beyond a double's range are refused
with :class:`~undolog_sdk.errors.EncodingError`: send such values as strings.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import blake3

from .encoding import to_json
from .errors import EncodingError

__all__ = ["call_signature", "canonical_json"]

_SAFE_INTEGER = 2**53
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def canonical_json(value: Any) -> str:
    """The canonical (RFC 8785) text of ``value``, after the SDK's encoding (see ``to_json``)."""
    out: list[str] = []
    _write(out, to_json(value))
    return "".join(out)


def call_signature(
    org: str, session: str, tool: str, args: Any, step: int | None = None
) -> str:
    """The call's signature: lowercase hex BLAKE3-256 of the canonical JSON of
    ``{"v": 1, "org", "session", "tool", "args"}``, plus ``"step"`` when one is given."""
    identity: dict[str, Any] = {"v": 1, "org": org, "session": session, "tool": tool, "args": args}
    if step is not None:
        identity["step"] = step
    return blake3.blake3(canonical_json(identity).encode("utf-8")).hexdigest()


def _write(out: list[str], value: Any) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(_integer(value))
    elif isinstance(value, float):
        out.append(_double(value))
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(out, item)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        for i, key in enumerate(sorted(value, key=_utf16)):
            if i:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _write(out, value[key])
        out.append("}")
    else:  # to_json only returns the types above
        raise EncodingError(f"cannot write {type(value).__name__} as JSON")


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _string(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise EncodingError(
            f"string {text!r} holds a lone surrogate, which is not valid Unicode text; fix the text"
        ) from None
    parts = ['"']
    for char in text:
        escaped = _ESCAPES.get(char)
        if escaped is not None:
            parts.append(escaped)
        elif char < " ":
            parts.append(f"\\u{ord(char):04x}")
        else:
            parts.append(char)
    parts.append('"')
    return "".join(parts)


def _integer(value: int) -> str:
    if -_SAFE_INTEGER <= value <= _SAFE_INTEGER:
        return str(value)
    try:
        text = _double(float(value))
    except (OverflowError, EncodingError):
        text = None
    if text is None or Decimal(text) != value:
        raise EncodingError(
            f"integer {value} cannot be carried exactly as an IEEE-754 double, so languages "
            "disagree about it; send it as a string"
        )
    return text


def _double(value: float) -> str:
    """ECMAScript's ``Number.prototype.toString``, from Python's shortest round-trip digits."""
    if not math.isfinite(value):
        raise EncodingError(f"{value} is not a finite number; JSON cannot carry it, send a string")
    if value == 0:
        return "0"
    text = repr(value)
    sign = "-" if text.startswith("-") else ""
    mantissa, _, exponent = text.lstrip("-").partition("e")
    whole, _, fraction = mantissa.partition(".")
    all_digits = whole + fraction
    stripped = all_digits.lstrip("0")
    digits = stripped.rstrip("0")
    # The value is 0.DIGITS × 10^point.
    point = len(whole) + int(exponent or 0) - (len(all_digits) - len(stripped))
    k = len(digits)
    if k <= point <= 21:
        body = digits + "0" * (point - k)
    elif 0 < point <= 21:
        body = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        body = "0." + "0" * -point + digits
    else:
        power = point - 1
        exp = ("+" if power >= 0 else "-") + str(abs(power))
        body = (digits if k == 1 else digits[0] + "." + digits[1:]) + "e" + exp
    return sign + body
