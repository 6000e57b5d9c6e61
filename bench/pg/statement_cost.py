"""The server's CPU per statement of a new call's effect, in several shapes, on the store's schema.

One connection per run speaks PostgreSQL's simple protocol itself (no driver between), sends
batches as the store does (BEGIN and the settings, K statements, COMMIT, one message), and reads
the CPU its backend used from /proc/PID/schedstat, so only the server's own work is counted.
Shapes:
  function   SELECT undolog_insert_new_effect(…24 literals…): what the store sends today
  execute    EXECUTE of that call prepared once per connection (PREPARE … AS SELECT …($1…))
  statement  the function's INSERT … SELECT … WHERE NOT EXISTS, sent as a statement of its own
  values     INSERT … VALUES into effects (no check)
  values:T   INSERT … VALUES into table T (batch_statements.sh makes copies of effects)

  python3 bench/pg/statement_cost.py DATABASE SHAPE [BATCHES] [K]   (defaults 400 batches of 10)
"""
import os
import socket
import struct
import sys
import uuid

SETTINGS = ("SELECT set_config('role', 'undolog_app', true), "
            "set_config('app.org_id', 'default', true), set_config('enable_seqscan', 'off', true)")
COLUMNS = ("org, id, session, seq, tool, args, step, signature, idempotency_key, tier, "
           "compensation, state, result, error, approval, lease_holder, lease_expires_at, "
           "created_at, updated_at, completed_at, resolved_by, verdicts")
TYPES = ("text, text, text, bigint, text, text, bigint, text, text, text, text, text, text, text, "
         "text, text, bigint, bigint, bigint, bigint, text, text, text, text")
COMPENSATION = ("'{\"kind\":\"upstream\",\"tool\":\"transfer\",\"args\":{\"amount\":"
                "\"{{args.amount}}\",\"from_account\":\"{{args.to_account}}\","
                "\"to_account\":\"{{args.from_account}}\"}}'")


class Connection:
    """A PostgreSQL connection on the simple protocol (trust authentication)."""

    def __init__(self, database):
        self.sock = socket.create_connection(("127.0.0.1", int(os.environ.get("PGPORT", 5432))))
        startup = b"user\0postgres\0database\0" + database.encode() + b"\0\0"
        self.sock.sendall(struct.pack("!ii", 8 + len(startup), 196608) + startup)
        self.buf = b""
        self.until_ready()

    def messages(self):
        while True:
            while len(self.buf) >= 5:
                length = struct.unpack("!i", self.buf[1:5])[0]
                if len(self.buf) < 1 + length:
                    break
                kind, body = self.buf[0:1], self.buf[5:1 + length]
                self.buf = self.buf[1 + length:]
                yield kind, body
            data = self.sock.recv(1 << 20)
            if not data:
                sys.exit("the server closed the connection")
            self.buf += data

    def until_ready(self):
        rows, error = [], None
        for kind, body in self.messages():
            if kind == b"D":
                rows.append(body)
            elif kind == b"E":
                error = body
            elif kind == b"Z":
                break
        if error:
            sys.exit(error.replace(b"\0", b" ").decode(errors="replace"))
        return rows

    def query(self, sql):
        text = sql.encode() + b"\0"
        self.sock.sendall(b"Q" + struct.pack("!i", 4 + len(text)) + text)
        return self.until_ready()


def statement(shape, session, seq):
    """The seq-th new effect of `session` in `shape`."""
    signature = uuid.uuid4().hex + uuid.uuid4().hex
    args = f"'{{\"amount\":{seq},\"from_account\":\"alice\",\"to_account\":\"bob\"}}'"
    values = ["'default'", f"'{uuid.uuid4()}'", f"'{session}'", str(seq), "'transfer'", args,
              "NULL", f"'{signature}'", "NULL", "'compensable'", COMPENSATION, "'pending'", "NULL",
              "NULL", "NULL", "'undolog-bench'", "1796580315339", "1796580305339",
              "1796580305339", "NULL", "NULL", "NULL"]
    check = ["'signature'", f"'{signature}'"]
    if shape == "function":
        return f"SELECT undolog_insert_new_effect({', '.join(values + check)})"
    if shape == "execute":
        return f"EXECUTE insert_new_effect({', '.join(values + check)})"
    if shape == "statement":
        return (f"INSERT INTO effects ({COLUMNS}) SELECT {', '.join(values)} WHERE NOT EXISTS "
                f"(SELECT FROM effects WHERE org = 'default' AND signature = '{signature}')")
    table = shape.split(":", 1)[1] if shape.startswith("values:") else "effects"
    return f"INSERT INTO {table} ({COLUMNS}) VALUES ({', '.join(values)})"


def main():
    database, shape = sys.argv[1], sys.argv[2]
    batches = int(sys.argv[3]) if len(sys.argv) > 3 else 400
    k = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    conn = Connection(database)
    pid = int(conn.query("SELECT pg_backend_pid()")[0][6:].decode())
    params = ", ".join(f"${i}" for i in range(1, 25))
    conn.query(f"PREPARE insert_new_effect({TYPES}) AS "
               f"SELECT undolog_insert_new_effect({params})")
    session, seq = f"bench-{os.getpid()}-{shape}", 0

    def batch():
        nonlocal seq
        statements = []
        for _ in range(k):
            seq += 1
            statements.append(statement(shape, session, seq))
        conn.query(f"BEGIN ISOLATION LEVEL READ COMMITTED; {SETTINGS}; "
                   f"{'; '.join(statements)}; COMMIT")

    def cpu_ns():
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])

    for _ in range(50):  # plans made, caches warm
        batch()
    before = cpu_ns()
    for _ in range(batches):
        batch()
    used = cpu_ns() - before
    print(f"{shape}: {used / 1000 / (batches * k):.1f} µs of the server's CPU a statement "
          f"({used / 1000 / batches:.0f} µs a batch of {k})")


if __name__ == "__main__":
    main()
