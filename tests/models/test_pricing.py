"""Prices and cost estimates."""

from __future__ import annotations

import pytest

from subagents.exceptions import ConfigError
from subagents.messages import Usage
from subagents.models import FunctionModel
from subagents.models.pricing import BUILTIN_PRICES, PRICES, Prices, PriceTable, cost_of, estimate_cost, lookup_prices


@pytest.mark.parametrize(("name", "prices"), [
    ("anthropic:claude-sonnet-4-6", Prices(3.0, 15.0, 0.3, 3.75)),
    ("claude-sonnet-4-5-20250929", Prices(3.0, 15.0, 0.3, 3.75)),
    ("claude-opus-4-1", Prices(15.0, 75.0, 1.5, 18.75)),
    ("claude-opus-4-6", Prices(5.0, 25.0, 0.5, 6.25)),
    ("claude-haiku-4-5-20251001", Prices(1.0, 5.0, 0.1, 1.25)),
    ("claude-sonnet-5", Prices(2.0, 10.0, 0.2, 2.5)),
    ("openai:gpt-4.1-mini-2025-04-14", Prices(0.4, 1.6, 0.1, None)),
    ("openai:gpt-4o@http://proxy/v1", Prices(2.5, 10.0, 1.25, None)),
])
def test_lookup_by_longest_prefix(name: str, prices: Prices) -> None:
    assert lookup_prices(name) == prices


def test_unknown_model_costs_none_not_zero() -> None:
    assert estimate_cost("openai:llama3.1@http://localhost:11434/v1", Usage(100, 100)) is None
    assert cost_of(FunctionModel(lambda r: "x"), Usage(100, 100)) is None


def test_cost_splits_cache_reads_and_writes_out_of_input() -> None:
    usage = Usage(input_tokens=1_000_000 + 2_000_000 + 500_000, output_tokens=100_000,
                  cache_read_tokens=2_000_000, cache_write_tokens=500_000)
    assert estimate_cost("claude-sonnet-4-6", usage) == pytest.approx(3.0 + 1.5 + 0.6 + 0.5 * 3.75)


def test_cache_writes_cost_input_price_when_not_listed() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=0, cache_read_tokens=1_000_000)
    assert estimate_cost("gpt-4.1", usage) == pytest.approx(0.5)


def test_overrides_win_and_price_local_models() -> None:
    table = PriceTable({"llama3.1": {"input": 0.0, "output": 0.0}, "gpt-4.1": {"input": 1, "output": 2}})
    assert table.estimate("openai:llama3.1@http://localhost:11434/v1", Usage(10, 10)) == 0.0
    assert table.lookup("gpt-4.1-2025-04-14") == Prices(1.0, 2.0)
    assert table.lookup("claude-sonnet-4-6") == PRICES["claude-sonnet-4"]  # the built-in table below them


def test_tables_are_independent_of_each_other_and_of_the_builtin_prices() -> None:
    cheap = PriceTable({"gpt-4.1": {"input": 1, "output": 2}})
    dear = PriceTable({"gpt-4.1": Prices(100.0, 200.0)})
    m = FunctionModel(lambda r: "x", name="openai:gpt-4.1")
    usage = Usage(1_000_000, 1_000_000)
    assert (cheap.cost_of(m, usage), dear.cost_of(m, usage)) == (3.0, 300.0)
    assert cost_of(m, usage) == BUILTIN_PRICES.cost_of(m, usage) == pytest.approx(10.0)
    assert cost_of(m, usage, dear) == 300.0
    assert estimate_cost("gpt-4.1", usage) == pytest.approx(10.0)  # no table leaked into the built-in one


def test_lookups_are_cached_per_name() -> None:
    table = PriceTable({"m": {"input": 1, "output": 1}})
    assert table.lookup("openai:m-2@http://h/v1") == Prices(1.0, 1.0)
    table.overrides.clear()  # the cache answers from now on: a table is built once and not edited
    assert table.lookup("openai:m-2@http://h/v1") == Prices(1.0, 1.0)
    assert table.lookup("unknown-model") is None


def test_a_bad_python_price_table_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="pricing of 'm' needs numbers for input and output"):
        PriceTable({"m": {"input": 1}})


def test_model_prices_attribute_wins() -> None:
    m = FunctionModel(lambda r: "x", prices=Prices(1.0, 1.0))
    assert cost_of(m, Usage(500_000, 500_000)) == pytest.approx(1.0)
