"""A plain asyncio script: charge twice, then undo. Run it twice with the same session id and the
second run replays every charge instead of charging again.

    undolog serve &                        # open mode, org "default"
    python examples/plain_asyncio.py order-42
    python examples/plain_asyncio.py order-42          # replayed: LEDGER stays empty
    python examples/plain_asyncio.py order-42 --undo   # refunds, newest first
"""

from __future__ import annotations

import asyncio
import json
import sys
from decimal import Decimal

from shop import LEDGER, charge, get_balance
from undolog_sdk import UndoLogSession


async def main(session_id: str, undo: bool) -> None:
    async with UndoLogSession(session_id=session_id) as session:
        print("balance before:", await get_balance("alice", _session=session))
        first = await charge("alice", Decimal("12.50"), _session=session)
        second = await charge("alice", Decimal("3.00"), _session=session)
        print("charged:", first.charge_id, second.charge_id)
        if undo:
            report = await session.undo()
            print("undo:", report.state, [step.tool for step in report.steps])
    print(json.dumps({"ledger": LEDGER}))  # what really happened in this run


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "order-42", "--undo" in sys.argv))
