"""``python -m subagents``: the same command line as the ``subagents`` script."""

from .cli.main import entry

if __name__ == "__main__":
    entry()
