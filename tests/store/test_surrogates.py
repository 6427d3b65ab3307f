"""Text with a lone surrogate (a tool that decoded bytes with ``surrogateescape``) cannot be written as UTF-8: the
SQLite writer stored nothing more and the store stopped ("surrogates not allowed").  It now writes the batch with each
lone surrogate as U+FFFD."""

from __future__ import annotations

from pathlib import Path

from subagents import Outcome, Runtime, ToolCategory, tool
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.store.sqlite import SQLiteStore


async def test_a_tool_result_with_a_lone_surrogate_is_stored_and_the_store_goes_on(workdir: Path) -> None:
    @tool(category=ToolCategory.READ)
    def legacy() -> str:
        """Read a Latin-1 file the old way."""
        return b"caf\xe9 au lait".decode("utf-8", "surrogateescape")

    def model(req: ModelRequest) -> ModelResponse:
        if req.messages[-1].tool_results:
            return ModelResponse("read it")
        return ModelResponse(tool_calls=[ToolCall("legacy", {})])

    db = workdir / "runs.db"
    async with Runtime(model=FunctionModel(model, inline=True), workdir=workdir, store=f"sqlite:///{db}",
                       tools=[legacy], builtin_tools=False) as rt:
        first = await rt.run("go")
        second = await rt.run("again")  # the store still writes after that batch
    assert (first.outcome, second.outcome) == (Outcome.OK, Outcome.OK)
    s = SQLiteStore(db)
    try:
        for r in (first, second):
            rec = s.get_run(r.id)
            assert rec is not None
            assert rec.status == "completed", rec.status
            results = [b.content for m in s.transcript(r.id) for b in m.tool_results]
            assert results == ["caf\ufffd au lait"], results
    finally:
        s.close()
