"""Connecting to the Temporal server of an engine URL (shared by the client and the worker; imports no runtime)."""

from __future__ import annotations

from temporalio.client import Client

from ...exceptions import ConfigError
from .target import TemporalTarget

__all__ = ["connect"]


async def connect(target: TemporalTarget) -> Client:
    """A client of the server at ``target`` (a clear error when nothing answers there)."""
    try:
        return await Client.connect(target.address, namespace=target.namespace)
    except RuntimeError as e:
        raise ConfigError(f"cannot reach the Temporal server at {target.address} ({e}); start one "
                          "(temporal server start-dev) or fix the engine URL") from None
