# Shared by the bench scripts: free ports, waiting for a listener, and the demo bank's gateway
# configuration (get_balance read only, transfer compensable by the reverse transfer).

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_port() {
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done
  echo "nothing listens on $1" >&2
  exit 1
}

# bank_config FILE BANK_PORT: a gateway in front of the demo bank at BANK_PORT.
bank_config() {
  cat > "$1" <<TOML
[[upstreams]]
name = "bank"
url = "http://127.0.0.1:$2/mcp"

[tools.get_balance]
tier = "read_only"
[tools.transfer]
tier = "compensable"
compensation = { tool = "transfer", args = { from_account = "{{args.to_account}}", to_account = "{{args.from_account}}", amount = "{{args.amount}}" } }
TOML
}
