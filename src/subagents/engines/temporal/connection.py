"""Connecting to the Temporal server of an engine URL (shared by the client and the worker; imports no runtime)."""

from __future__ import annotations

from temporalio.client import Client

from ...exceptions import ConfigError
from .target import TemporalTarget

__all__ = ["connect", "connected"]

connected = False
"""Whether this process has connected to a Temporal server (the CLI then leaves without the interpreter's
finalization, which temporalio's Rust threads can abort: temporalio/sdk-python#300)."""


async def connect(target: TemporalTarget) -> Client:
    """A client of the server at ``target`` (a clear error when nothing answers there)."""
    global connected
    try:
        client = await Client.connect(target.address, namespace=target.namespace)
    except RuntimeError as e:
        raise ConfigError(f"cannot reach the Temporal server at {target.address} ({e}); start one "
                          "(temporal server start-dev) or fix the engine URL") from None
    connected = True
    return client
