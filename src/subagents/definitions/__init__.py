"""Agent definitions: the dataclass, built-ins and the loader along the hierarchy."""

from .loader import DefinitionSet, load_definitions, parse_definition, parse_definition_file
from .model import MODEL_ALIASES, AgentDefinition

__all__ = [
    "MODEL_ALIASES",
    "AgentDefinition",
    "DefinitionSet",
    "load_definitions",
    "parse_definition",
    "parse_definition_file",
]
