"""The tools every example shares: plain functions, decorated once, used from any framework."""

from __future__ import annotations

import dataclasses
import uuid
from decimal import Decimal

from undolog_sdk import ToolTier, undolog_tool

# What really happened, to show that a rerun does not charge twice and that undo refunds.
LEDGER: list[str] = []


@dataclasses.dataclass
class Receipt:
    charge_id: uuid.UUID
    account: str
    amount: Decimal


@undolog_tool(tier=ToolTier.READ_ONLY)
async def get_balance(account: str) -> Decimal:
    return Decimal("100.00") - sum(
        (Decimal(line.split()[-1]) for line in LEDGER if line.startswith(f"charge {account} ")),
        Decimal(0),
    )


async def refund(receipt: Receipt, *, account: str, amount: Decimal) -> None:
    LEDGER.append(f"refund {account} {amount} ({receipt.charge_id})")


@undolog_tool(tier=ToolTier.COMPENSABLE, compensation=refund)
async def charge(account: str, amount: Decimal) -> Receipt:
    LEDGER.append(f"charge {account} {amount}")
    return Receipt(uuid.uuid4(), account, amount)


@undolog_tool(tier=ToolTier.IRREVERSIBLE)
async def send_receipt(to: str, text: str) -> str:
    LEDGER.append(f"email {to}: {text}")
    return "sent"
