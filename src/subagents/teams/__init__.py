"""Teams (issue 14): a lead and named teammates with a shared task board and a mailbox.

See :mod:`subagents.teams.model` (the records), :mod:`subagents.teams.store` (the durable layer).
"""
