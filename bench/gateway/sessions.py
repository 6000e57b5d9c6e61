"""Opens N live MCP sessions on a gateway (2025-11-25, each with its Mcp-Session-Id, one call
made in each, none closed) and prints the gateway's resident memory before and after, in MiB.

    python3 sessions.py URL PID N
"""
import http.client
import json
import sys
import urllib.parse


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for {pid}")


def post(conn, path, body, session=None):
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    if session:
        headers["Mcp-Session-Id"] = session
    conn.request("POST", path, json.dumps(body), headers)
    response = conn.getresponse()
    text = response.read().decode()
    if response.status >= 300:
        raise SystemExit(f"{body.get('method')}: HTTP {response.status}: {text[:300]}")
    return response.getheader("Mcp-Session-Id"), text


def main():
    url, pid, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    parts = urllib.parse.urlsplit(url)
    before = rss_mib(pid)
    conn = http.client.HTTPConnection(parts.hostname, parts.port)
    for n in range(count):
        session, _ = post(conn, parts.path, {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "bench-sessions", "version": "1"}}})
        if not session:
            raise SystemExit("the gateway gave no Mcp-Session-Id")
        post(conn, parts.path, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        _, answer = post(conn, parts.path, {
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "get_balance", "arguments": {"account": "alice"}}}, session)
        if '"isError":false' not in answer.replace(" ", ""):
            raise SystemExit(f"session {n}: the call failed: {answer[:300]}")
    print(json.dumps({"sessions": count, "rss_before_mib": round(before, 1),
                      "rss_after_mib": round(rss_mib(pid), 1)}))


main()
