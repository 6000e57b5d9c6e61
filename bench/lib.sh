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

# end_run [DB]: what a bench script started is gone, for `trap … EXIT`: the caller's `pids`
# killed, the database DB on the caller's `pg_url` dropped if one is named, its `work` removed.
end_run() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${1:-}" ]; then
    psql "$pg_url/postgres" -qc "DROP DATABASE IF EXISTS $1 WITH (FORCE)" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}

# start_bank_and_gateway BIN STORE_URL WORK: the demo bank, and a gateway on STORE_URL in front of
# it (its configuration and log in WORK); their pids join the caller's `pids`, and `bank`,
# `gateway` (pids) and `target` (the gateway's /mcp URL) are set. A STORE_URL of split:STORE
# starts `undolog engine` on STORE (its log in WORK, its pid `engine`) and a gateway with no store
# in front of it over gRPC, as bench/gateway.sh's split row.
start_bank_and_gateway() {
  local bin=$1 store=$2 work=$3 bank_port gateway_port engine_port flag=--store
  bank_port=$(port)
  "$bin" demo-bank --listen "127.0.0.1:$bank_port" >/dev/null 2>&1 & pids+=($!); bank=$!
  wait_port "$bank_port"
  bank_config "$work/gateway.toml" "$bank_port"
  if [[ $store == split:* ]]; then
    engine_port=$(port)
    "$bin" engine --config "$work/gateway.toml" --listen "127.0.0.1:$engine_port" \
      --store "${store#split:}" >"$work/engine.log" 2>&1 & pids+=($!); engine=$!
    wait_port "$engine_port"
    flag=--engine; store="grpc://127.0.0.1:$engine_port"
  fi
  gateway_port=$(port)
  "$bin" serve --config "$work/gateway.toml" --listen "127.0.0.1:$gateway_port" "$flag" "$store" \
    >"$work/gateway.log" 2>&1 & pids+=($!); gateway=$!
  wait_port "$gateway_port"
  target="http://127.0.0.1:$gateway_port/mcp"
}
