#!/usr/bin/env python3
"""Checks the deployment recipe in deploy/ and the Dockerfile, as ./verify runs it.

    python3 deploy/check.py PATH/TO/undolog

- `docker compose config` where docker has the compose plugin; everywhere, the compose file is
  read and linted here: the services and how they depend on each other, bind mounts that exist,
  named volumes declared, host ports unique, one store URL that names the postgres service with
  its credentials, and Prometheus scraping each gateway on the port its configuration serves;
- the Dockerfile: several stages, the last one a non-root user with the binary alone and an
  exec-form entrypoint, every base image pinned to a tag;
- Prometheus' configuration and alerting rules with `promtool check`;
- the systemd unit with `systemd-analyze verify` (any complaint fails), pointed at the built
  binary, and the sandboxing directives it must keep.

Prints one line per check; exits 1 with every problem found.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from urllib.parse import urlparse

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
problems: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        problems.append(what)


def compose() -> None:
    path = DEPLOY / "compose.yaml"
    if shutil.which("docker") and subprocess.run(
        ["docker", "compose", "version"], capture_output=True
    ).returncode == 0:
        run = subprocess.run(["docker", "compose", "-f", str(path), "config", "-q"], capture_output=True, text=True)
        check(run.returncode == 0, f"docker compose config: {run.stderr.strip() or 'valid'}")
    else:
        print("note docker compose is not installed here: the compose file is linted by this script alone")
    spec = yaml.safe_load(path.read_text())
    services = spec.get("services", {})
    want = {"postgres", "keys", "gateway-a", "gateway-b", "prometheus"}
    check(want <= set(services), f"compose services include {sorted(want)} (found {sorted(services)})")
    declared = set(spec.get("volumes") or {})
    host_ports: list[str] = []
    for name, service in services.items():
        check("image" in service, f"{name}: names its image")
        image = service.get("image", "")
        check(":" in image and not image.endswith(":latest"), f"{name}: image {image!r} is pinned to a tag")
        depends = service.get("depends_on") or {}
        if isinstance(depends, list):  # the short form: names alone
            depends = {d: {} for d in depends}
        for dependency, wanted in depends.items():
            check(dependency in services, f"{name}: depends on a service that exists ({dependency})")
            condition = (wanted or {}).get("condition")
            if condition == "service_healthy":
                check("healthcheck" in services.get(dependency, {}), f"{name}: {dependency} has the healthcheck it waits for")
            if condition == "service_completed_successfully":
                check(services.get(dependency, {}).get("restart") == "no", f"{name}: {dependency} runs once")
        for volume in service.get("volumes") or []:
            source = volume.split(":")[0]
            if source.startswith("."):
                check((DEPLOY / source).exists(), f"{name}: bind mount {source} exists")
            else:
                check(source in declared, f"{name}: volume {source} is declared")
        for port in service.get("ports") or []:
            host_ports.append(str(port).split(":")[0])
        if "build" in service:
            context = (DEPLOY / service["build"]["context"]).resolve()
            dockerfile = context / service["build"].get("dockerfile", "Dockerfile")
            check(dockerfile.exists(), f"{name}: builds {dockerfile.relative_to(ROOT)}")
    check(len(host_ports) == len(set(host_ports)), f"host ports are unique ({host_ports})")

    env = services["postgres"].get("environment", {})
    expected = f"postgres://{env.get('POSTGRES_USER')}:{env.get('POSTGRES_PASSWORD')}@postgres:5432/{env.get('POSTGRES_DB')}"
    gateways = [n for n in services if n.startswith("gateway-")]
    names = set()
    for name in gateways:
        service = services[name]
        store = service.get("environment", {}).get("UNDOLOG_STORE")
        check(store == expected, f"{name}: UNDOLOG_STORE is the postgres service's database ({store})")
        check(urlparse(f"http://{service['environment'].get('UNDOLOG_LISTEN')}").port == 8080, f"{name}: listens on 8080")
        names.add(service.get("environment", {}).get("UNDOLOG_EXECUTOR__NAME"))
        command = service.get("command", [])
        config = command[command.index("--config") + 1] if "--config" in command else None
        mounted = [v.split(":")[1] for v in service.get("volumes") or []]
        check(config in mounted, f"{name}: its --config {config} is mounted")
    check(len(names) == len(gateways) and None not in names, "each gateway has an executor name of its own")
    keys = services["keys"].get("command", [])
    check(expected in keys, "keys: makes its key in the gateways' store")

    gateway = tomllib.loads((DEPLOY / "gateway.toml").read_text())
    metrics_port = urlparse(f"http://{gateway['metrics']['listen']}").port
    prometheus = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    targets = {t for job in prometheus["scrape_configs"] for c in job["static_configs"] for t in c["targets"]}
    check(targets == {f"{g}:{metrics_port}" for g in gateways}, f"Prometheus scrapes every gateway on {metrics_port} ({sorted(targets)})")


def dockerfile() -> None:
    lines = [l.strip() for l in (ROOT / "Dockerfile").read_text().splitlines()]
    lines = [l for l in lines if l and not l.startswith("#")]
    stages: list[list[str]] = []
    for line in lines:
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    check(len(stages) >= 2, f"Dockerfile: multi-stage ({len(stages)} stages)")
    for stage in stages:
        image = stage[0].split()[1]
        check(":" in image and not image.endswith(":latest"), f"Dockerfile: base {image} is pinned to a tag")
    last = stages[-1]
    users = [l.split()[1] for l in last if l.upper().startswith("USER ")]
    check(bool(users) and users[-1].split(":")[0] not in {"root", "0"}, f"Dockerfile: runs as a non-root user ({users})")
    copies = [l for l in last if l.upper().startswith(("COPY ", "ADD "))]
    check(
        len(copies) == 1 and copies[0].startswith("COPY --from=") and len(copies[0].split()) == 4,
        f"Dockerfile: the last stage takes the binary alone ({copies})",
    )
    check(not any(l.upper().startswith("RUN ") for l in last), "Dockerfile: the last stage runs nothing at build time")
    entry = [l for l in last if l.upper().startswith("ENTRYPOINT ")]
    check(bool(entry) and entry[-1].split(None, 1)[1].startswith("["), "Dockerfile: exec-form ENTRYPOINT")
    build = " ".join(stages[0])
    check("--locked" in build and "--release" in build, "Dockerfile: a locked release build")


def prometheus() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        text = (DEPLOY / "prometheus.yml").read_text().replace("/etc/prometheus/alerts.yml", str(DEPLOY / "alerts.yml"))
        config = Path(scratch) / "prometheus.yml"
        config.write_text(text)
        for args in (["check", "config", str(config)], ["check", "rules", str(DEPLOY / "alerts.yml")]):
            run = subprocess.run(["promtool", *args], capture_output=True, text=True)
            check(run.returncode == 0, f"promtool {args[0]} {args[1]}: {(run.stdout + run.stderr).strip().splitlines()[-1]}")


def systemd(binary: Path) -> None:
    unit = (DEPLOY / "undolog.service").read_text()
    for directive in (
        "DynamicUser=yes",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "CapabilityBoundingSet=\n",
        "RestrictAddressFamilies=",
        "SystemCallFilter=@system-service",
        "StateDirectory=undolog",
    ):
        check(directive in unit, f"undolog.service: keeps {directive.strip()}")
    exec_start = re.search(r"^ExecStart=(\S+)", unit, re.M)
    check(exec_start is not None, "undolog.service: has ExecStart")
    if not shutil.which("systemd-analyze"):
        print("note systemd-analyze is not installed here: the unit is checked for its directives alone")
        return
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "undolog.service"
        copy.write_text(unit.replace(exec_start.group(1), str(binary)))
        run = subprocess.run(["systemd-analyze", "verify", "--man=no", str(copy)], capture_output=True, text=True)
        said = (run.stdout + run.stderr).strip()
        check(run.returncode == 0 and not said, f"systemd-analyze verify: {said or 'no complaint'}")


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: deploy/check.py PATH/TO/undolog")
    binary = Path(sys.argv[1]).resolve()
    if not binary.exists():
        sys.exit(f"{binary} does not exist: build it first (cargo build -p undolog-cli)")
    compose()
    dockerfile()
    prometheus()
    systemd(binary)
    if problems:
        print(f"\n{len(problems)} problem(s) in the deployment recipe", file=sys.stderr)
        sys.exit(1)
    print("the deployment recipe is consistent")


if __name__ == "__main__":
    main()
