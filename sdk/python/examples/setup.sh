#!/usr/bin/env bash
# Makes the virtual environment the framework examples run in (LangGraph, the OpenAI Agents SDK,
# and this SDK), once: a marker keyed on the requirements and the SDK's sources skips the install
# when nothing changed. Usage: examples/setup.sh VENV_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${1:?usage: setup.sh VENV_DIR}
key=$(cat "$here/requirements.txt" "$here/../pyproject.toml" $(find "$here/../src" -name '*.py' | sort) | sha256sum | cut -c1-16)
marker="$venv/.undolog-examples-$key"
[ -f "$marker" ] && exit 0
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" "$here/.."
rm -f "$venv"/.undolog-examples-*
touch "$marker"
