"""Writes signature-vectors.json from independent implementations.

The expected canonical texts come from the `rfc8785` package and the signatures from the `blake3`
package, not from UndoLog's own code, so the Rust and Python tests that read the file check
UndoLog against a third party. Run: pip install rfc8785 blake3 && python3 testdata/generate_vectors.py [OUTPUT]
(./verify regenerates into a temporary file and checks that nothing changed.)
"""

import decimal
import json
import pathlib
import sys

import blake3
import rfc8785

SAFE = 2**53


class Inexact(Exception):
    pass


def to_jcs_input(value):
    """An integer past 2^53 is accepted only if its double is written with the same digits."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if abs(value) < SAFE:
            return value
        as_double = float(value)
        if decimal.Decimal(repr(as_double)) == value:
            return as_double
        raise Inexact(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise Inexact(value)
        return value
    if isinstance(value, list):
        return [to_jcs_input(v) for v in value]
    return {k: to_jcs_input(v) for k, v in value.items()}


def parse(text):
    def refuse(token):
        raise Inexact(token)

    return json.loads(text, parse_constant=refuse)


def canonical(text):
    value = to_jcs_input(parse(text))
    # Python's float("1e400") is inf: refused above, as in Rust.
    return rfc8785.dumps(value).decode("utf-8")


CANONICAL = [
    ("empty object", "{}"),
    ("empty array", "[]"),
    ("empty containers nested", '{"a":{},"b":[],"c":[{}, []]}'),
    ("literals", "[null, true, false]"),
    ("key order ascii", '{"b":2,"a":1,"c":3}'),
    ("key order is by code unit, not locale", '{"a":1,"B":2,"_":3,"1":4}'),
    ("nested objects sorted at every level", '{"z":{"y":{"b":1,"a":2},"x":0},"a":[{"d":1,"c":2}]}'),
    ("arrays keep their order", "[3,1,2]"),
    ("keys by UTF-16 code units with a key outside the BMP",
     '{"\\ud83d\\ude00":"emoji","\\ufb01":"ligature","\\u00e9":"e-acute","z":"z"}'),
    ("RFC 8785 sorting example",
     '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh",'
     '"1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control","\\u00f6":"Latin Small Letter O With Diaeresis"}'),
    ("RFC 8785 main example",
     '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],'
     '"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}'),
    ("escapes", '["quote\\"","backslash\\\\","slash\\/","tab\\t","newline\\n","cr\\r","bs\\b","ff\\f"]'),
    ("control characters", '["\\u0000","\\u0001","\\u001f","\\u007f"]'),
    ("unicode kept as itself", '["caf\\u00e9","\\u65e5\\u672c","\\ud83d\\ude80","\\u2028"]'),
    ("integers", "[0,1,-1,42,9007199254740991,-9007199254740991]"),
    ("2^53 is exact", "[9007199254740992]"),
    ("large integers written as their doubles are", "[18014398509481984, 1152921504606847000, 731973731954860200000]"),
    ("negative zero", "[-0, -0.0, 0.0]"),
    ("floats", "[1.0, 1.5, -2.25, 0.1, 3.141592653589793]"),
    ("exponents", "[1e21, 1e20, 1E-7, 1e-6, 2e+2, 5e-324, 1.7976931348623157e308]"),
    ("large numbers", "[1e300, 123456789012345680000.0, 4.5e15, 1000000000000000000000]"),
    ("tiny numbers", "[0.000001, 0.0000001, 1.2e-10]"),
    ("deep nesting", '{"a":{"b":{"c":{"d":{"e":[1,[2,[3,[4]]]]}}}}}'),
]

REJECTED = [
    ("integer past 2^53 not exact", '{"n":9007199254740993}'),
    ("integer past 2^64", '{"n":18446744073709551617}'),
    ("negative integer past 2^53 not exact", '{"n":-9007199254740993}'),
    ("number out of range", '{"n":1e400}'),
    ("exact 2^60 written with other digits than its double", '{"n":1152921504606846976}'),
    ("exact integer past 2^127", '{"n":1361129467683753853853498429727072845824}'),
]

SIGNATURES = [
    ("transfer without step", "acme", "s-1", "transfer", '{"from":"alice","to":"bob","amount":10}', None),
    ("transfer with step 0", "acme", "s-1", "transfer", '{"from":"alice","to":"bob","amount":10}', 0),
    ("transfer with step 1", "acme", "s-1", "transfer", '{"from":"alice","to":"bob","amount":10}', 1),
    ("same call, keys in another order", "acme", "s-1", "transfer", '{"amount":10,"to":"bob","from":"alice"}', None),
    ("another org", "globex", "s-1", "transfer", '{"from":"alice","to":"bob","amount":10}', None),
    ("another session", "acme", "s-2", "transfer", '{"from":"alice","to":"bob","amount":10}', None),
    ("another tool", "acme", "s-1", "refund", '{"from":"alice","to":"bob","amount":10}', None),
    ("amount as float", "acme", "s-1", "transfer", '{"from":"alice","to":"bob","amount":10.5}', None),
    ("amount 10.0 equals 10", "acme", "s-1", "transfer", '{"from":"alice","to":"bob","amount":10.0}', None),
    ("empty arguments", "acme", "s-1", "get_balance", "{}", None),
    ("unicode everywhere", "\u00e9cole", "s\u00e9ance-\U0001f600", "envoyer_\u00e9", '{"texte":"\\u00e9t\\u00e9 \\ud83d\\ude00"}', 3),
    ("nested arguments", "acme", "s-1", "send_email",
     '{"to":["a@example.com","b@example.com"],"body":{"subject":"Hi","lines":["x","y"]},"cc":null}', None),
    ("large step", "acme", "s-1", "transfer", '{"amount":1}', 9007199254740991),
]


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def signature_case(name, org, session, tool, args, step):
    obj = {"v": 1, "org": org, "session": session, "tool": tool, "args": to_jcs_input(parse(args))}
    if step is not None:
        obj["step"] = step
    text = rfc8785.dumps(obj).decode("utf-8")
    sig = blake3.blake3(text.encode("utf-8")).hexdigest()
    case = {"name": name, "org": org, "session": session, "tool": tool, "args": args}
    if step is not None:
        case["step"] = step
    case.update(canonical=text, signature=sig, lock_key=f"{fnv1a64(sig.encode('ascii')):016x}")
    return case


def main():
    for _, text in REJECTED:
        try:
            canonical(text)
        except Inexact:
            continue
        raise SystemExit(f"expected {text} to be refused")
    vectors = {
        "about": "Shared test vectors for RFC 8785 canonical JSON and UndoLog call signatures. "
        "Inputs are JSON text so every language parses the same numbers. Generated by "
        "testdata/generate_vectors.py from the rfc8785 and blake3 packages; do not edit by hand.",
        "canonical": [{"name": n, "input": t, "canonical": canonical(t)} for n, t in CANONICAL],
        "rejected": [{"name": n, "input": t} for n, t in REJECTED],
        "signatures": [signature_case(*case) for case in SIGNATURES],
    }
    default = pathlib.Path(__file__).with_name("signature-vectors.json")
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else default
    out.write_text(json.dumps(vectors, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}: {len(CANONICAL)} canonical, {len(REJECTED)} rejected, {len(SIGNATURES)} signatures")


if __name__ == "__main__":
    main()
