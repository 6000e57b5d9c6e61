"""The same `charge` tool in an OpenAI Agents SDK agent. A scripted model (no API call) asks for
the charge, the Agents SDK's Runner runs the function tool, and the model then answers. Run it
twice with the same session id: the second run replays the charge.

    pip install -r examples/requirements.txt ./   # from sdk/python
    python examples/openai_agents.py order-8
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

from agents import Agent, RunContextWrapper, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse, TResponseOutputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from shop import LEDGER, charge
from undolog_sdk import UndoLogSession


@function_tool
async def charge_card(ctx: RunContextWrapper[UndoLogSession], account: str, amount: str) -> str:
    """Charge an account (amount in dollars, as a decimal string)."""
    receipt = await charge(account, Decimal(amount), _session=ctx.context)
    return json.dumps({"charge_id": str(receipt.charge_id), "amount": str(receipt.amount)})


class ScriptedModel(Model):
    """Stands in for the LLM: first a tool call, then a final answer."""

    def __init__(self) -> None:
        self.turns: list[list[TResponseOutputItem]] = [
            [ResponseFunctionToolCall(type="function_call", call_id="call-1", name="charge_card",
                                      arguments=json.dumps({"account": "carol", "amount": "20.00"}))],
            [ResponseOutputMessage(type="message", id="msg-1", role="assistant", status="completed",
                                   content=[ResponseOutputText(type="output_text", text="Charged carol.",
                                                               annotations=[])])],
        ]

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("this example does not stream")


async def main(session_id: str) -> None:
    set_tracing_disabled(True)
    agent = Agent[UndoLogSession](name="cashier", instructions="Charge as asked.",
                                  tools=[charge_card], model=ScriptedModel())
    async with UndoLogSession(session_id=session_id) as session:
        result = await Runner.run(agent, "charge carol 20 dollars", context=session)
        print("agent:", result.final_output)
    print(json.dumps({"ledger": LEDGER}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "order-8"))
