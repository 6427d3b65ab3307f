"""The public face of the package: ``subagents.__all__`` is pinned, and every docstring example runs."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import subagents

PUBLIC = [
    "AgentDefinition", "AgentHandle", "AgentSummary", "ApprovalRequest", "ConfigError", "Decision",
    "DefinitionError", "Event", "HookInput", "HookResult", "LimitExceeded",
    "Limits", "Message", "ModelError", "Outcome", "RunResult", "Runtime", "SpawnError", "Status",
    "StoreError", "SubagentsError", "TextBlock", "Tool", "ToolCategory", "ToolContext", "ToolError",
    "ToolResultBlock", "ToolUseBlock", "Usage", "UserError", "__version__", "tool",
]


def test_all_is_pinned() -> None:
    assert sorted(subagents.__all__) == sorted(PUBLIC)
    for name in subagents.__all__:
        assert getattr(subagents, name) is not None


def test_import_is_lazy_and_names_are_their_modules() -> None:
    """``import subagents`` loads nothing else; each public name, on first use, is its defining module's object."""
    code = ("import sys, subagents; before = sorted(m for m in sys.modules if m.startswith('subagents')); "
            "import importlib; "
            "bad = [n for n in subagents.__all__ if n != '__version__' and getattr(subagents, n) is not "
            "getattr(importlib.import_module('subagents.' + subagents._HOME[n]), n)]; "
            "print(before, bad, subagents.models.FunctionModel.__name__, 'Runtime' in dir(subagents))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['subagents'] [] FunctionModel True"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        subagents.nope  # noqa: B018
    with pytest.raises(ImportError):
        from subagents import nope  # noqa: F401


def test_models_public_names() -> None:
    import subagents.models as m

    assert sorted(m.__all__) == sorted([
        "AgentInfo", "FunctionModel", "Model", "ModelRequest", "ModelResponse", "ToolCall", "ToolSpec",
        "new_call_id", "parse_model_string", "resolve_model"])


DOC_MODULES = [
    "subagents", "subagents.messages", "subagents.limits", "subagents.runtime.inbox",
    "subagents.runtime.runtime", "subagents.tools.base", "subagents.models.function",
    "subagents.definitions.model", "subagents.authority.rules", "subagents.authority.permissions",
    "subagents.authority.approvals", "subagents.authority.names", "subagents.authority.hooks",
    "subagents.sandbox.env", "subagents.sandbox.home", "subagents.sandbox.gitident", "subagents.sandbox.policy",
    "subagents.sandbox.workspace", "subagents.sandbox.spawnthread",
    "subagents.engines.local", "subagents.engines.inline", "subagents.ids", "subagents.runtime.notices",
    "subagents.trust", "subagents.markup",
]


@pytest.mark.parametrize("module", DOC_MODULES)
def test_docstring_examples_run(module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_import_loads_no_provider_sdk_and_no_rich() -> None:
    code = ("import sys, subagents, subagents.models; from subagents import Runtime; "
            "bad = [m for m in ('anthropic', 'openai', 'rich', 'yaml', 'httpx') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
