"""Writes the two pgbench scripts of batch_statements.sh for a batch of K new calls.

Each script is two transactions, as the engine's session batches send them: the K calls' new
effects (each checked against an earlier one of its signature), then their K outcomes with their
undo entries. `--shape today` sends one function call per operation (migrations 11 and 12);
`--shape arrays` sends one statement per kind, the batch's rows as one JSON array
(batch_statements.sql). Values are literals in simple-protocol messages, as the store writes them.
"""
import argparse
import json

SETTINGS = ("BEGIN ISOLATION LEVEL READ COMMITTED \\; SELECT set_config('role', 'undolog_app', "
            "true), set_config('app.org_id', 'bench', true), "
            "set_config('enable_seqscan', 'off', true)")
ARGS = '{"amount":1797557785000724,"from_account":"alice","to_account":"bob"}'
COMPENSATION = ('{"kind":"upstream","tool":"transfer","args":{"amount":"{{args.amount}}",'
                '"from_account":"{{args.to_account}}","to_account":"{{args.from_account}}"}}')
RESULT = ('{"content":[{"text":"{\\"from_account\\":\\"alice\\",\\"moved\\":1797557785000723,'
          '\\"to_account\\":\\"bob\\"}","type":"text"}],"isError":false,"structuredContent":'
          '{"from_account":"alice","moved":1797557785000723,"to_account":"bob"}}')
HOLDER = "undolog-01a24b30-47b4-707d-8067-520b7597cc79"


def quote(text):
    return "'" + text.replace("'", "''") + "'"


def effect(i):
    """The i-th new effect of the batch; :r makes every transaction's ids its own."""
    return {"id": f"e:r-{i}", "session": "s:r", "seq": i, "tool": "transfer", "args": ARGS,
            "step": None, "signature": f"sig:r-{i}", "idempotency_key": None,
            "tier": "compensable", "compensation": COMPENSATION, "state": "pending",
            "result": None, "error": None, "approval": None, "lease_holder": HOLDER,
            "lease_expires_at": 1796557796129, "created_at": 1796557786129,
            "updated_at": 1796557786129, "completed_at": None, "resolved_by": None,
            "verdicts": None, "check_by": "signature", "check_value": f"sig:r-{i}"}


def outcome(i):
    return {"id": f"e:r-{i}", "was_state": "pending", "was_error": None, "was_approval": None,
            "was_lease_holder": HOLDER, "was_lease_expires_at": 1796557796129,
            "was_updated_at": 1796557786129, "was_completed_at": None, "was_resolved_by": None,
            "new_state": "committed", "new_result": RESULT, "new_error": None,
            "new_approval": None, "new_lease_holder": None, "new_lease_expires_at": None,
            "new_updated_at": 1796557786130, "new_completed_at": 1796557786130,
            "new_resolved_by": None, "new_verdicts": None, "session": "s:r",
            "pushed_at": 1796557786130}


def literal(value):
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    return quote(value)


def call(function, row):
    return f"SELECT {function}('bench', " + ", ".join(literal(v) for v in row.values()) + ")"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", choices=["today", "arrays"], required=True)
    parser.add_argument("--calls", type=int, required=True)
    a = parser.parse_args()
    effects = [effect(i) for i in range(1, a.calls + 1)]
    outcomes = [outcome(i) for i in range(1, a.calls + 1)]
    print("\\set r random(1, 1000000000000000)")
    if a.shape == "today":
        inserts = [call("undolog_insert_new_effect", e) for e in effects]
        updates = [call("undolog_replace_effect_push_undo", o) for o in outcomes]
    else:
        inserts = [f"SELECT undolog_insert_new_effects('bench', {quote(json.dumps(effects))})"]
        updates = [f"SELECT undolog_replace_effects_push_undo('bench', "
                   f"{quote(json.dumps(outcomes))})"]
    print(" \\; ".join([SETTINGS, *inserts, "COMMIT;"]))
    print(" \\; ".join([SETTINGS, *updates, "COMMIT;"]))


main()
