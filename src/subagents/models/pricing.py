"""Per-model prices and cost estimates.

Prices are USD per million tokens: input, output, cache read, cache write.  A model that is not
in the table (and has no ``prices`` attribute of its own) costs ``None`` — unknown, not free.
Configured prices (``[pricing."<model>"]``) live in a :class:`PriceTable` per runtime, never in
module state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..exceptions import ConfigError
from ..messages import Usage

__all__ = ["BUILTIN_PRICES", "PRICES", "PriceTable", "Prices", "cost_of", "estimate_cost", "lookup_prices"]


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

_NO_PRICE: Any = object()


class PriceTable:
    """Prices by model name: a runtime's own ``[pricing."<model>"]`` tables over the built-in :data:`PRICES`.

    Each :class:`~subagents.Runtime` builds one from its settings and hands it to the places that
    compute cost, so two runtimes in one process keep their own prices.  A name matches exactly or by
    its longest listed prefix (dated snapshots match their family); the configured table is searched
    before the built-in one.  Lookups are cached per name.

    >>> table = PriceTable({"llama3.1": {"input": 0.2, "output": 0.4}})
    >>> table.estimate("openai:llama3.1@http://localhost:11434/v1", Usage(1_000_000, 0))
    0.2
    """

    __slots__ = ("_cache", "overrides")

    def __init__(self, overrides: Mapping[str, Prices | Mapping[str, Any]] | None = None) -> None:
        self.overrides: dict[str, Prices] = {name: _prices(name, p) for name, p in (overrides or {}).items()}
        self._cache: dict[str, Prices | None] = {}

    def lookup(self, model_name: str) -> Prices | None:
        """Prices for a model name (``provider:`` prefix and ``@base_url`` suffix ignored); ``None``: unknown."""
        found = self._cache.get(model_name, _NO_PRICE)
        if found is _NO_PRICE:
            if len(self._cache) >= 1024:
                self._cache.clear()
            found = self._cache[model_name] = _lookup(model_name, (self.overrides, PRICES))
        return found  # type: ignore[no-any-return]

    def estimate(self, model_name: str, usage: Usage) -> float | None:
        """Cost of ``usage`` on a model by name; ``None`` when its price is unknown (not free)."""
        p = self.lookup(model_name)
        return None if p is None else p.cost(usage)

    def cost_of(self, model: Any, usage: Usage) -> float | None:
        """Cost of ``usage`` on ``model``: its own ``prices`` attribute, else this table by its name."""
        p = getattr(model, "prices", None)
        if isinstance(p, Prices):
            return p.cost(usage)
        return self.estimate(str(getattr(model, "name", "")), usage)

    def __repr__(self) -> str:
        return f"PriceTable({len(self.overrides)} configured over {len(PRICES)} built-in)"


def _prices(name: str, p: Prices | Mapping[str, Any]) -> Prices:
    if isinstance(p, Prices):
        return p
    try:
        return Prices(float(p["input"]), float(p["output"]),
                      None if p.get("cache_read") is None else float(p["cache_read"]),
                      None if p.get("cache_write") is None else float(p["cache_write"]))
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f'pricing of {name!r} needs numbers for input and output (USD per million tokens), '
                          f"and optionally cache_read and cache_write; got {dict(p)!r} ({type(e).__name__})") from None


def _lookup(model_name: str, tables: tuple[Mapping[str, Prices], ...]) -> Prices | None:
    name = model_name.split(":", 1)[-1].split("@", 1)[0]
    for table in tables:
        if name in table:
            return table[name]
        best = max((k for k in table if name.startswith(k)), key=len, default=None)
        if best is not None:
            return table[best]
    return None


BUILTIN_PRICES = PriceTable()
"""The built-in prices alone (what a model costs when no runtime configured its price)."""


def lookup_prices(model_name: str) -> Prices | None:
    """Prices for a model name in the built-in table (a runtime's own: ``PriceTable.lookup``)."""
    return BUILTIN_PRICES.lookup(model_name)


def estimate_cost(model_name: str, usage: Usage) -> float | None:
    """Cost of ``usage`` on a model by name, at the built-in prices."""
    return BUILTIN_PRICES.estimate(model_name, usage)


def cost_of(model: Any, usage: Usage, prices: PriceTable | None = None) -> float | None:
    """Cost of ``usage`` on ``model``: its own ``prices`` attribute, else ``prices`` (default: built-in) by name."""
    return (prices or BUILTIN_PRICES).cost_of(model, usage)
