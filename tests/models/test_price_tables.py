"""Prices are per runtime (issue 13): two runtimes in one process with different ``[pricing]`` tables
each charge their own prices; neither leaks into the other nor into the built-in table."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents import Limits, Runtime
from subagents.config import Settings, load_settings
from subagents.exceptions import SpawnError
from subagents.messages import Usage
from subagents.models import FunctionModel, ModelRequest, ModelResponse
from subagents.models.pricing import estimate_cost


def answer(req: ModelRequest) -> ModelResponse:
    return ModelResponse(text="ok", usage=Usage(input_tokens=1_000_000, output_tokens=1_000_000))


def settings_with_price(root: Path, input_usd: float, output_usd: float) -> Settings:
    (root / ".subagents").mkdir(parents=True)
    (root / ".subagents" / "config.toml").write_text(
        f'[pricing."local-llm"]\ninput = {input_usd}\noutput = {output_usd}\n', encoding="utf-8")
    return load_settings(root, env={"XDG_CONFIG_HOME": str(root / "xdg")})


async def test_two_runtimes_keep_their_own_prices(tmp_path: Path) -> None:
    model = FunctionModel(answer, name="openai:local-llm@http://localhost:8000/v1", inline=True)
    a, b = tmp_path / "a", tmp_path / "b"
    sa, sb = settings_with_price(a, 1.0, 2.0), settings_with_price(b, 10.0, 20.0)
    async with Runtime(model, workdir=a, settings=sa, store="memory://") as rt_a, \
            Runtime(model, workdir=b, settings=sb, store="memory://") as rt_b:  # b built last
        ra = await rt_a.run("hi", limits=Limits(max_cost_usd=100))
        rb = await rt_b.run("hi", limits=Limits(max_cost_usd=100))
    assert (ra.cost_usd, rb.cost_usd) == (pytest.approx(3.0), pytest.approx(30.0))
    assert estimate_cost("local-llm", Usage(1, 1)) is None  # the built-in table never learnt it


async def test_a_runtime_without_the_price_refuses_a_cost_limit(tmp_path: Path) -> None:
    model = FunctionModel(answer, name="openai:local-llm@http://localhost:8000/v1", inline=True)
    priced = settings_with_price(tmp_path / "a", 1.0, 2.0)
    async with Runtime(model, workdir=tmp_path / "a", settings=priced, store="memory://"), \
            Runtime(model, workdir=tmp_path, store="memory://") as bare:
        with pytest.raises(SpawnError, match="has no known price"):
            await bare.run("hi", limits=Limits(max_cost_usd=100))
