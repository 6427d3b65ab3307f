"""The numbers of a definition's front matter as an author writes them.

PyYAML reads YAML 1.1, where ``1e3`` (no dot, no sign in the exponent) is a string: ``timeout_s: 1e3`` was refused
as "must be a positive number, got '1e3'". It is 1000 now; what is still no number says how to write it. A limit
past any sane bound (``max_turns: 1e30``) is refused as ``subagents run --max-turns`` refuses it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.definitions import AgentDefinition, load_definitions, parse_definition_file
from subagents.definitions.values import MAX_TIMEOUT_S, MAX_TURNS
from subagents.exceptions import DefinitionError


def load(tmp_path: Path, key: str, value: str) -> AgentDefinition:
    p = tmp_path / "a.md"
    head = "name: a\n" if key == "description" else "name: a\ndescription: d\n"
    p.write_text(f"---\n{head}{key}: {value}\n---\nbody\n", encoding="utf-8")
    return parse_definition_file(p)


@pytest.mark.parametrize(("key", "value", "field", "expected"), [
    ("timeout_s", "1e3", "timeout_s", 1000.0),
    ("timeout_s", "1.5E2", "timeout_s", 150.0),
    ("timeout", "2e1", "timeout_s", 20.0),
    ("max_cost_usd", "5e-1", "max_cost_usd", 0.5),
    ("max_turns", "1e2", "max_turns", 100),
    ("maxTurns", "1E2", "max_turns", 100),
    ("max_tokens", "2e5", "max_tokens", 200_000),
    ("max_tokens", "1.5e5", "max_tokens", 150_000),
])
def test_numbers_written_with_an_exponent_are_numbers(tmp_path: Path, key: str, value: str, field: str,
                                                       expected: float) -> None:
    d = load(tmp_path, key, value)
    assert getattr(d, field) == expected


@pytest.mark.parametrize("key", ["max_turns", "max_tokens"])
def test_whole_numbers_come_out_as_int(tmp_path: Path, key: str) -> None:
    assert type(getattr(load(tmp_path, key, "1e2"), key)) is int


@pytest.mark.parametrize(("key", "value", "message"), [
    ("max_turns", "1.5e0", "'max_turns' must be a positive whole number, got '1.5e0' (write it without an "
                           "exponent, e.g. 1000 for 1e3)"),
    ("max_tokens", "1e400", "'max_tokens' must be a positive whole number, got '1e400' (write it without"),
    ("timeout_s", "-1e3", "'timeout_s' must be a positive number, got -1000.0"),
    ("timeout_s", "1e3s", "'timeout_s' must be a positive number, got '1e3s'"),
    ("max_cost_usd", "'ten'", "'max_cost_usd' must be a positive number, got 'ten'"),
    ("max_turns", "1e30", f"'max_turns' must be at most {MAX_TURNS}, got 1000000000000000019884624838656"),
    ("max_turns", str(MAX_TURNS + 1), f"'max_turns' must be at most {MAX_TURNS}"),
    ("timeout_s", "1e300", f"'timeout_s' must be at most {MAX_TIMEOUT_S:.0f}, got 1e+300"),
])
def test_what_is_no_sane_number_is_refused_with_the_fix(tmp_path: Path, key: str, value: str, message: str) -> None:
    with pytest.raises(DefinitionError) as e:
        load(tmp_path, key, value)
    assert message in str(e.value)


def test_the_largest_limits_still_load(tmp_path: Path) -> None:
    d = load(tmp_path, "max_turns", str(MAX_TURNS))
    assert d.max_turns == MAX_TURNS


def test_a_text_value_of_other_keys_stays_text(tmp_path: Path) -> None:
    """Only the numeric keys read ``1e3`` as a number: a description of ``1e3`` is the text it was."""
    assert load(tmp_path, "description", "1e3").description == "1e3"


def test_a_python_definition_is_bounded_as_a_file_is(tmp_path: Path) -> None:
    d = AgentDefinition("big", "d", "p", max_turns=MAX_TURNS + 1)
    with pytest.raises(DefinitionError, match=rf"'max_turns' must be at most {MAX_TURNS}"):
        load_definitions(tmp_path, session=[d], user_dir=tmp_path / "user")
