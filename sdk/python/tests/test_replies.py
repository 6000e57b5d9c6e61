"""How the SDK reads the gateway's answers: each status and error code becomes the error that says
what happened (pure: no gateway)."""

from __future__ import annotations

import pytest

from undolog_sdk import CallFailedError, GatewayError, GatewayUnavailableError
from undolog_sdk.flow import Reply, checked

EFFECT = "01a23000-0000-7000-8000-000000000001"


@pytest.mark.parametrize(
    ("reply", "call_failed", "raised", "code"),
    [
        (Reply(409, {"error": "the identical call failed", "code": "call_failed", "effect_id": EFFECT}), True,
         CallFailedError, None),
        # "Still running" is a conflict too, but no failure: the call may yet succeed.
        (Reply(409, {"error": "still running after the wait limit", "code": "still_running"}), True,
         GatewayError, "still_running"),
        (Reply(409, {"error": "the identical call failed", "code": "call_failed"}), False, GatewayError,
         "call_failed"),
        (Reply(422, {"error": "key reused", "code": "idempotency_key_reused"}), True, GatewayError,
         "idempotency_key_reused"),
        (Reply(503, {"error": "store unavailable", "code": "store_unavailable"}), True,
         GatewayUnavailableError, None),
        (Reply(502, "not json"), True, GatewayUnavailableError, None),
    ],
)
def test_each_answer_becomes_the_error_that_says_what_happened(
    reply: Reply, call_failed: bool, raised: type[Exception], code: str | None
) -> None:
    with pytest.raises(raised) as caught:
        checked(reply, call_failed=call_failed)
    assert type(caught.value) is raised
    if isinstance(caught.value, GatewayError):
        assert caught.value.code == code
    if isinstance(caught.value, CallFailedError):
        assert caught.value.effect_id == EFFECT


def test_a_success_is_its_body() -> None:
    assert checked(Reply(200, {"outcome": "execute"})) == {"outcome": "execute"}


@pytest.mark.parametrize(
    ("body", "in_doubt"),
    [
        # Nothing was recorded: the tool did not run, a retry is safe.
        ({"error": "the effect log is unavailable", "code": "store_unavailable"}, False),
        # The tool ran and its outcome was not recorded: in doubt, named.
        ({"error": "outcome not recorded", "code": "outcome_not_recorded", "effect_id": EFFECT, "in_doubt": True},
         True),
    ],
)
def test_a_503_says_whether_the_tool_may_have_run(body: dict[str, object], in_doubt: bool) -> None:
    with pytest.raises(GatewayUnavailableError) as caught:
        checked(Reply(503, body), call_failed=True)
    assert caught.value.in_doubt is in_doubt
    assert caught.value.effect_id == body.get("effect_id")
