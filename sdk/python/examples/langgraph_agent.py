"""The shop's `charge` tool in a LangGraph agent. A scripted "model" node asks for two charges
(no model call needed); LangGraph's own ToolNode runs them. Run it twice with the same session id:
the second run replays both charges instead of charging again.

    pip install -r examples/requirements.txt ./   # from sdk/python
    python examples/langgraph_agent.py order-7
"""

from __future__ import annotations

import asyncio
import json
import sys
from decimal import Decimal
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

from shop import LEDGER, charge
from undolog_sdk import UndoLogSession


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def tools_for(session: UndoLogSession) -> list[StructuredTool]:
    async def charge_card(account: str, amount: str) -> str:
        """Charge an account (amount in dollars, as a decimal string)."""
        receipt = await charge(account, Decimal(amount), _session=session)
        return json.dumps({"charge_id": str(receipt.charge_id), "amount": str(receipt.amount)})

    return [StructuredTool.from_function(coroutine=charge_card)]


def scripted_model(state: State) -> dict[str, Any]:
    """Stands in for the LLM: one turn that calls the tool twice."""
    calls = [
        {"name": "charge_card", "args": {"account": "alice", "amount": "12.50"}, "id": "call-1"},
        {"name": "charge_card", "args": {"account": "bob", "amount": "3.00"}, "id": "call-2"},
    ]
    return {"messages": [AIMessage(content="", tool_calls=calls)]}


async def main(session_id: str) -> None:
    async with UndoLogSession(session_id=session_id) as session:
        graph = StateGraph(State)
        graph.add_node("model", scripted_model)
        graph.add_node("tools", ToolNode(tools_for(session)))
        graph.add_edge(START, "model")
        graph.add_edge("model", "tools")
        graph.add_edge("tools", END)
        final = await graph.compile().ainvoke({"messages": [("user", "charge alice and bob")]})
        for message in final["messages"][-2:]:
            print(f"{message.type}: {message.content}")
    print(json.dumps({"ledger": LEDGER}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "order-7"))
