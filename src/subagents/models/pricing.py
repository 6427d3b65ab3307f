"""Per-model prices and cost estimates.

Prices are USD per million tokens: input, output, cache read, cache write.  A model that is not
in the table (and has no ``prices`` attribute of its own) costs ``None`` — unknown, not free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..messages import Usage

__all__ = ["PRICES", "Prices", "cost_of", "estimate_cost", "lookup_prices", "set_price_overrides"]


@dataclass(slots=True, frozen=True)
class Prices:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        cr = self.input if self.cache_read is None else self.cache_read
        cw = self.input if self.cache_write is None else self.cache_write
        # Usage.input_tokens counts every input token; cache reads/writes are part of it.
        plain = max(usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens, 0)
        return (plain * self.input + usage.output_tokens * self.output
                + usage.cache_read_tokens * cr + usage.cache_write_tokens * cw) / 1_000_000


# Longest matching prefix wins (dated snapshots match their family).
PRICES: dict[str, Prices] = {
    # Anthropic (platform.claude.com/docs/en/about-claude/pricing; cache write = 5-minute write).
    "claude-fable-5": Prices(10.0, 50.0, 1.0, 12.5),
    "claude-fable-5-1": Prices(10.0, 50.0, 0.25, 12.5),
    "claude-mythos-5": Prices(10.0, 50.0, 1.0, 12.5),
    "claude-mythos-5-1": Prices(10.0, 50.0, 0.25, 12.5),
    "claude-opus-5": Prices(5.0, 25.0, 0.5, 6.25),
    "claude-opus-5-5": Prices(4.0, 20.0, 0.4, 5.0),
    "claude-opus-4": Prices(15.0, 75.0, 1.5, 18.75),
    "claude-opus-4-5": Prices(5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-6": Prices(5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-7": Prices(5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-8": Prices(5.0, 25.0, 0.5, 6.25),
    "claude-sonnet-5": Prices(2.0, 10.0, 0.2, 2.5),
    "claude-sonnet-5-5": Prices(2.0, 10.0, 0.1, 2.5),
    "claude-sonnet-4": Prices(3.0, 15.0, 0.3, 3.75),
    "claude-3-7-sonnet": Prices(3.0, 15.0, 0.3, 3.75),
    "claude-3-5-sonnet": Prices(3.0, 15.0, 0.3, 3.75),
    "claude-haiku-5-5": Prices(0.1, 0.5, 0.01, 0.125),
    "claude-haiku-4": Prices(1.0, 5.0, 0.1, 1.25),
    "claude-3-5-haiku": Prices(0.8, 4.0, 0.08, 1.0),
    # OpenAI (cache writes are not billed separately).
    "gpt-5": Prices(1.25, 10.0, 0.125, None),
    "gpt-5-mini": Prices(0.25, 2.0, 0.025, None),
    "gpt-5-nano": Prices(0.05, 0.4, 0.005, None),
    "gpt-4.1": Prices(2.0, 8.0, 0.5, None),
    "gpt-4.1-mini": Prices(0.4, 1.6, 0.1, None),
    "gpt-4.1-nano": Prices(0.1, 0.4, 0.025, None),
    "gpt-4o": Prices(2.5, 10.0, 1.25, None),
    "gpt-4o-mini": Prices(0.15, 0.6, 0.075, None),
    "o3": Prices(2.0, 8.0, 0.5, None),
    "o4-mini": Prices(1.1, 4.4, 0.275, None),
}

_overrides: dict[str, Prices] = {}


def set_price_overrides(table: Mapping[str, Mapping[str, Any]]) -> None:
    """Install prices from configuration (``[pricing."model-name"] input = 3.0 ...``)."""
    _overrides.clear()
    for name, p in table.items():
        _overrides[name] = Prices(float(p["input"]), float(p["output"]),
                                  None if p.get("cache_read") is None else float(p["cache_read"]),
                                  None if p.get("cache_write") is None else float(p["cache_write"]))


def lookup_prices(model_name: str) -> Prices | None:
    """Prices for a model name (``provider:`` prefix and ``@base_url`` suffix ignored)."""
    name = model_name.split(":", 1)[-1].split("@", 1)[0]
    for table in (_overrides, PRICES):
        if name in table:
            return table[name]
        best = max((k for k in table if name.startswith(k)), key=len, default=None)
        if best is not None:
            return table[best]
    return None


def estimate_cost(model_name: str, usage: Usage) -> float | None:
    p = lookup_prices(model_name)
    return None if p is None else p.cost(usage)


def cost_of(model: Any, usage: Usage) -> float | None:
    """Cost of ``usage`` on ``model``: its own ``prices`` attribute, else the table by name."""
    p = getattr(model, "prices", None)
    if isinstance(p, Prices):
        return p.cost(usage)
    return estimate_cost(str(getattr(model, "name", "")), usage)
