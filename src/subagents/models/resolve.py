"""Resolve ``provider:model`` strings (and model objects) to a :class:`Model`.

Accepted forms::

    anthropic:<model>                  e.g. anthropic:claude-sonnet-4-5
    openai:<model>                     e.g. openai:gpt-4.1
    openai:<model>@<base_url>          any OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio)

The adapters live in ``models/anthropic.py`` and ``models/openai.py`` and are imported only here,
on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..exceptions import ConfigError
from ._retry import url_problem
from .base import Model

if TYPE_CHECKING:
    from .clients import ClientPool

__all__ = ["ACCEPTED_FORMS", "ModelSpec", "parse_model_string", "resolve_model"]

ACCEPTED_FORMS = (
    "anthropic:<model>            (e.g. anthropic:claude-sonnet-4-5; key from ANTHROPIC_API_KEY)\n"
    "  openai:<model>               (e.g. openai:gpt-4.1; key from OPENAI_API_KEY)\n"
    "  openai:<model>@<base_url>    (any OpenAI-compatible server, e.g. openai:llama3.1@http://localhost:11434/v1)"
)

_PROVIDERS = {"anthropic": "anthropic", "openai": "openai"}


@dataclass(slots=True, frozen=True)
class ModelSpec:
    """A parsed model string."""

    provider: str
    model: str
    base_url: str | None = None


def parse_model_string(spec: str) -> ModelSpec:
    """Parse ``provider:model[@base_url]``; raise :class:`ConfigError` listing the accepted forms."""
    provider, sep, rest = spec.strip().partition(":")
    if not sep or not provider or not rest:
        raise ConfigError(f"malformed model string {spec!r}; accepted forms:\n  {ACCEPTED_FORMS}")
    provider = provider.lower()
    if provider not in _PROVIDERS:
        raise ConfigError(f"unknown model provider {provider!r} in {spec!r}; accepted forms:\n  {ACCEPTED_FORMS}")
    model, at, base_url = rest.partition("@")
    if not model or (at and not base_url):
        raise ConfigError(f"malformed model string {spec!r}; accepted forms:\n  {ACCEPTED_FORMS}")
    if at and provider != "openai":
        raise ConfigError(
            f"a base URL is only accepted for openai-compatible servers, not {provider!r} ({spec!r}); "
            f"accepted forms:\n  {ACCEPTED_FORMS}"
        )
    if base_url and (problem := url_problem(base_url)) is not None:
        raise ConfigError(f"the base URL {base_url!r} in {spec!r} {problem} "
                          f"(e.g. openai:{model}@http://localhost:11434/v1)")
    return ModelSpec(provider, model, base_url or None)


def resolve_model(spec: Model | str, settings: Mapping[str, Any] | None = None, *,
                  clients: ClientPool | None = None) -> Model:
    """Return a :class:`Model` for a model object or a ``provider:model`` string.

    ``settings`` carries provider options from the configuration (API keys, retries, prices).
    ``clients`` is the pool the model takes its SDK client from (a runtime passes its own and closes it);
    without it, :data:`~subagents.models.clients.SHARED`.  A model object is returned as it is.
    """
    if not isinstance(spec, str):
        if not hasattr(spec, "request"):
            raise ConfigError(
                f"model must be a Model (an object with an async request()) or a string; got {type(spec).__name__}"
            )
        return spec
    parsed = parse_model_string(spec)
    module = importlib.import_module(f".{_PROVIDERS[parsed.provider]}", __package__)
    factory = module.from_spec
    model: Model = factory(parsed, dict(settings or {}), clients)
    return model
