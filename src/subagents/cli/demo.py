"""``subagents demo``: the offline demo — a scripted model (no LLM) driving the real tools."""

from __future__ import annotations

import sys

import click

from .common import FiniteFloat, cwd_option, isatty, workdir
from .run import MODE_CHOICES

__all__ = ["demo"]


@click.command()
@cwd_option("Directory to survey (default: the current directory).")
@click.option("--json", "as_json", is_flag=True, help="Write one JSON event per line, then the result.")
@click.option("--pace", "pace_s", type=FiniteFloat(min=0), default=None, metavar="SECONDS",
              help="Make each scripted model call take this long, to watch the agents in the live view "
                   "(default: 0.3 on a terminal, 0 otherwise).")
@click.option("--permission-mode", type=click.Choice(MODE_CHOICES), default="autoEdit", show_default=True,
              help="The demo only writes its report, so file edits are allowed; pass 'default' to be asked first.")
@click.option("--team", "team", is_flag=True,
              help="Run the team demo instead: a lead and 3 teammates count the lines of up to 3 file types with a "
                   "shared task board and mail, the lead sums them and the demo checks the sum against the files.")
def demo(as_json: bool, pace_s: float | None, permission_mode: str, team: bool) -> int:
    """Survey a directory with a scripted model (no LLM, no key needed) and the real tools.

    The agent lists the directory, counts files by extension, greps for TODO/FIXME and Python
    definitions, reads the README, writes subagents-demo-report.md and summarises it.

    With --team, a team does it: the lead (coordinator) puts one task per file type on a board, three
    teammates claim them and count lines with glob and read_file, message their counts, and one of
    them writes subagents-team-report.md; the sum is checked against the files ('subagents team show'
    shows the board afterwards).
    """
    from ..config import load_settings
    from ..demo import DEMO_LABEL, DEMO_PROMPT, REPORT_PATH, demo_model
    from .run import execute

    cwd = workdir()
    settings = load_settings(cwd, overrides={"permission_mode": permission_mode})
    settings.engine_url = None  # its scripted model runs in this process, whatever [engine] url says (offline)
    if pace_s is None:
        pace_s = 0.3 if isatty(sys.stderr) and not as_json else 0.0
    if team:
        from .demo_team import run_team_demo

        return run_team_demo(cwd, settings, as_json=as_json, pace_s=pace_s, execute=execute)
    if not as_json:
        click.echo(f"subagents demo — {DEMO_LABEL} — real tools over {cwd.resolve()}", err=True)
    code = execute(demo_model(pace_s), DEMO_PROMPT, workdir=cwd, settings=settings, as_json=as_json)
    if not as_json and code == 0:
        click.echo(f"Report: {cwd.resolve() / REPORT_PATH}", err=True)
    return code
