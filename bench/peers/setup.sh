#!/usr/bin/env bash
# Create bench/peers/.venv with pinned versions of the peer frameworks.
# Never a dependency of the project: this venv is separate and gitignored.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python3}"
if [ ! -x "$here/.venv/bin/python" ]; then
  "$py" -m venv "$here/.venv"
fi
"$here/.venv/bin/python" -m pip install --quiet --upgrade pip
"$here/.venv/bin/python" -m pip install --quiet -r "$here/requirements.txt"
"$here/.venv/bin/python" -m pip install --quiet -r "$here/requirements-temporal.txt"
"$here/.venv/bin/python" -c "import agents, pydantic_ai, langgraph.graph, langchain_core; print('peers venv ok')"
"$here/.venv/bin/python" -c "import pydantic_ai.durable_exec.temporal; print('temporal peer ok')"
