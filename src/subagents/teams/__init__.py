"""Teams (issue 14): a lead and named teammates with a shared task board and a mailbox.

See :mod:`subagents.teams.model` (the records), :mod:`subagents.teams.store` (the durable layer, with
:mod:`~subagents.teams.memory` and :mod:`~subagents.teams.sqlite`) and :func:`open_team_store` (the team
store of a run store).
"""

from .open import open_team_store

__all__ = ["open_team_store"]
