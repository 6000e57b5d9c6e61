"""The one encoding of Python values: what each type becomes, what is refused, and decoding by
annotation (how a replayed result comes back)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
from decimal import Decimal
from typing import Any, Optional

import pydantic
import pytest

from undolog_sdk import EncodingError, canonical_json, from_json, to_json


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Booking:
    id: uuid.UUID
    price: Decimal
    at: dt.datetime
    seats: list[int]


class Invoice(pydantic.BaseModel):
    number: str
    total: Decimal
    booking: Optional[Booking] = None


UTC = dt.timezone.utc
BOOKING = Booking(uuid.UUID("12345678-1234-5678-1234-567812345678"), Decimal("99.90"),
                  dt.datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC), [1, 2])
BOOKING_JSON = {"id": "12345678-1234-5678-1234-567812345678", "price": "99.90",
                "at": "2026-01-02T03:04:05.600000Z", "seats": [1, 2]}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Decimal("12.50"), "12.50"),
        (Decimal("1E+3"), "1000"),
        (Decimal("-0.000001"), "-0.000001"),
        (dt.datetime(2026, 11, 30, 13, 0, tzinfo=dt.timezone(dt.timedelta(hours=1))), "2026-11-30T12:00:00Z"),
        (dt.date(2026, 11, 30), "2026-11-30"),
        (uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF"), "6f9619ff-8b86-d011-b42d-00c04fc964ff"),
        (Colour.RED, "red"),
        ((1, "a"), [1, "a"]),
        (BOOKING, BOOKING_JSON),
        (Invoice(number="F-1", total=Decimal("10.00"), booking=BOOKING),
         {"number": "F-1", "total": "10.00", "booking": BOOKING_JSON}),
    ],
    ids=repr,
)
def test_each_type_has_one_encoding(value: Any, expected: Any) -> None:
    assert to_json(value) == expected
    assert canonical_json(value) == canonical_json(expected)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (dt.datetime(2026, 1, 1), "time zone"),
        ({1: "a"}, "keys must be strings"),
        ({1, 2}, "cannot encode set"),
        (b"bytes", "cannot encode bytes"),
        (Decimal("NaN"), "not finite"),
        (float("inf"), "finite"),
        (2**53 + 1, "send it as a string"),
        ("\ud800", "lone surrogate"),
    ],
    ids=repr,
)
def test_what_cannot_be_encoded_is_refused_with_what_to_do(value: Any, says: str) -> None:
    with pytest.raises(EncodingError, match=says):
        canonical_json(value)


def test_decoding_follows_the_annotation() -> None:
    assert from_json(BOOKING_JSON, Booking) == BOOKING
    invoice = Invoice(number="F-1", total=Decimal("10.00"), booking=BOOKING)
    assert from_json(to_json(invoice), Invoice) == invoice
    assert from_json(["red"], list[Colour]) == [Colour.RED]
    assert from_json("1.5", Optional[Decimal]) == Decimal("1.5")
    assert from_json({"a": "1"}, dict[str, Decimal]) == {"a": Decimal("1")}
    assert from_json({"x": 1}, Any) == {"x": 1}
    with pytest.raises(EncodingError, match="does not match"):
        from_json("not a uuid", uuid.UUID)
