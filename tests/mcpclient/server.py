"""A small MCP server for the tests, written with the official SDK (``MCPServer``, mcp 2.x).

Run: ``python server.py [--http PORT]`` (stdio by default).  Tools: ``add``, ``echo_env``, ``danger``,
``slow`` (sleeps), ``crash`` (the process exits at once), ``whoami`` (pid and whether a file is writable).
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("testsrv")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
def echo_env(name: str) -> str:
    """The value of an environment variable of the server process ('<unset>' when it has none)."""
    return os.environ.get(name, "<unset>")


@server.tool()
def danger(target: str) -> str:
    """A tool the permission rules deny in the tests."""
    return f"destroyed {target}"


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "finally"


@server.tool()
def crash() -> str:
    """End the server process at once (a crash), counting the starts in $CRASH_COUNT_FILE."""
    os._exit(3)


@server.tool()
def starts() -> int:
    """How many times this server was started (from $START_FILE)."""
    path = os.environ.get("START_FILE", "")
    return len(open(path).read().splitlines()) if path else 0


@server.tool()
def try_write(path: str) -> str:
    """Try to create a file; say what happened."""
    try:
        with open(path, "w") as f:
            f.write("x")
    except OSError as e:
        return f"refused: {e.strerror}"
    return "written"


if __name__ == "__main__":
    start_file = os.environ.get("START_FILE")
    if start_file:
        with open(start_file, "a") as f:
            f.write(f"{os.getpid()}\n")
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
