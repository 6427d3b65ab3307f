"""A raw JSON-RPC MCP server over stdio (no SDK), misbehaving as its spec file says: ``python hostile_server.py SPEC``.

The spec (JSON) holds ``tools`` (the ``tools/list`` answer, as is, valid or not), ``calls`` (what each tool
call does), and at the top level: ``pidfile`` (each start appends its pid), ``start_delay`` (seconds before
it reads anything), ``init`` (``"ok"``, ``"hang"``: never answers ``initialize``), ``banner`` (a line printed on
stdout before anything else) and ``stubborn`` (ignores SIGTERM and the end of its stdin).

A call's behaviour: ``result`` (the result object, as is), ``error`` (a JSON-RPC error object), ``stderr_mb``
(writes that many MiB to stderr first, then the line ``THE LAST LINE``), ``list_changed`` (a new ``tools`` list:
the server takes it and sends ``notifications/tools/list_changed`` before it answers).  By default it answers ``ok``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

spec: dict[str, Any] = json.loads(Path(sys.argv[1]).read_text())


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(msg: dict[str, Any]) -> None:
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        if spec.get("init") == "hang":
            time.sleep(3600)
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": spec.get("tools", [])}})
    elif method == "tools/call":
        how = spec.get("calls", {}).get(msg["params"]["name"], {})
        if how.get("stderr_mb"):
            line = "x" * 1023 + "\n"
            for _ in range(how["stderr_mb"] * 1024):
                sys.stderr.write(line)
            sys.stderr.write("THE LAST LINE\n")
            sys.stderr.flush()
        if "list_changed" in how:
            spec["tools"] = how["list_changed"]
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        if "error" in how:
            send({"jsonrpc": "2.0", "id": mid, "error": how["error"]})
        else:
            send({"jsonrpc": "2.0", "id": mid, "result": how.get("result", {
                "content": [{"type": "text", "text": "ok"}]})})
    elif mid is not None:  # server/discover, pings...: not supported
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})


def main() -> None:
    if spec.get("pidfile"):
        with open(spec["pidfile"], "a") as f:
            f.write(f"{os.getpid()}\n")
    if spec.get("stubborn"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(spec.get("start_delay", 0))
    if spec.get("banner"):
        print(spec["banner"], flush=True)
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        answer(msg)
    if spec.get("stubborn"):
        time.sleep(3600)


if __name__ == "__main__":
    main()
