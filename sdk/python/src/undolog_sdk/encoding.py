"""The SDK's one encoding of Python values as JSON, used for arguments, results and signatures.

=====================  ===========================================================
Python                 JSON
=====================  ===========================================================
None, bool, str        null, true/false, string
int, float             number (finite; integers a double cannot carry are refused)
Decimal                string of its exact digits, plain notation: ``"12.50"``
datetime (aware)       RFC 3339 string in UTC: ``"2026-11-30T12:00:00Z"``
                       (``.ffffff`` only when there are microseconds); naive refused
date                   ``"2026-11-30"``
UUID                   lowercase string
Enum                   its value, encoded
dataclass instance     object of its fields, encoded
pydantic model         object of ``model_dump()`` (field names), encoded
dict (str keys)        object; list and tuple: array
=====================  ===========================================================

Anything else (sets, bytes, other objects) is refused with a message naming the type. Decoding
(:func:`from_json`) follows a function's type annotations, so a replayed result comes back as the
type the function declares.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import types
import typing
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from .errors import EncodingError

__all__ = ["from_json", "to_json"]

JSON = None | bool | int | float | str | list["JSON"] | dict[str, "JSON"]


def to_json(value: Any) -> JSON:
    """Encodes ``value`` as a JSON value (see the module's table)."""
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise EncodingError(f"Decimal {value} is not finite; JSON cannot carry it")
        return format(value, "f")
    if isinstance(value, dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise EncodingError(
                f"datetime {value.isoformat()} has no time zone; attach one "
                "(datetime.now(timezone.utc)) so it means one instant"
            )
        text = value.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat()
        return text + "Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump") and not isinstance(value, type):
        return to_json(value.model_dump())
    if isinstance(value, Mapping):
        out: dict[str, JSON] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise EncodingError(
                    f"object keys must be strings, not {type(key).__name__} ({key!r}); convert them"
                )
            out[key] = to_json(item)
        return out
    if isinstance(value, (list, tuple)):
        return [to_json(item) for item in value]
    raise EncodingError(
        f"cannot encode {type(value).__name__} as JSON; use JSON values, Decimal, datetime, date, "
        "UUID, Enum, dataclasses or pydantic models"
    )


def from_json(value: Any, annotation: Any) -> Any:
    """Decodes a JSON value into the annotated type where the encoding says how; other values are
    returned as they are."""
    if annotation is Any or annotation is None or value is None:
        return value
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    try:
        if origin in (typing.Union, types.UnionType):
            options = [a for a in args if a is not type(None)]
            return from_json(value, options[0]) if len(options) == 1 else value
        if origin in (list, tuple) and isinstance(value, list):
            inner = args[0] if args else Any
            items = [from_json(v, inner) for v in value]
            return tuple(items) if origin is tuple else items
        if origin is dict and isinstance(value, dict):
            inner = args[1] if len(args) == 2 else Any
            return {k: from_json(v, inner) for k, v in value.items()}
        if not isinstance(annotation, type):
            return value
        if issubclass(annotation, bool) or annotation in (str, int, float):
            return value
        if issubclass(annotation, Decimal):
            return annotation(str(value))
        if issubclass(annotation, dt.datetime):
            return dt.datetime.fromisoformat(value)
        if issubclass(annotation, dt.date):
            return dt.date.fromisoformat(value)
        if issubclass(annotation, uuid.UUID):
            return annotation(value)
        if issubclass(annotation, enum.Enum):
            return annotation(value)
        if dataclasses.is_dataclass(annotation) and isinstance(value, dict):
            hints = _hints(annotation)
            fields = {
                f.name: from_json(value[f.name], hints.get(f.name, Any))
                for f in dataclasses.fields(annotation)
                if f.init and f.name in value
            }
            return annotation(**fields)
        if hasattr(annotation, "model_validate"):
            return annotation.model_validate(value)
    except (ValueError, TypeError, KeyError) as e:
        raise EncodingError(
            f"cannot decode {value!r} as {annotation!r}: {e}; the recorded value does not match "
            "the function's annotation"
        ) from e
    return value


def _hints(obj: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(obj)
    except Exception:  # unresolvable forward references: decode without them
        return {}
