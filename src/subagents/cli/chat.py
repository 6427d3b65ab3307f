"""``subagents chat``: an interactive conversation with an agent, background sub-agents announced as they end.

The command takes ``run``'s options (the same :class:`click.Option` objects: model, agent, workspace,
limits, permission mode, rules, sandbox) plus ``--store`` and ``--resume ID``.  The conversation
itself is :class:`~.chat_session.ChatSession`; the terminal (prompt, toolbar, printing around the
prompt) is :class:`~.chat_screen.Screen`.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..config import NO_MODEL_HELP
from .common import isatty, store_option, store_url, workdir
from .run import run as _run_command

if TYPE_CHECKING:
    from ..config import Settings
    from ..runtime.limits import Limits
    from ..runtime.runtime import Runtime
    from .chat_session import ChatSession

__all__ = ["chat"]

_SHARED = ("model_name", "agent", "cwd", "max_turns", "timeout_s", "permission_mode", "allow", "deny",
           "sandbox_mode")
"""The options ``chat`` takes from ``run`` (the very same option objects: same names, types and help)."""

PROMPT = "› "


@click.command()
@click.argument("prompt", required=False)
@click.option("--resume", "resume_ref", metavar="ID",
              help="Continue an earlier conversation: its id, id prefix or nickname (printed when a chat starts "
                   "and ends; 'subagents runs list' shows them).")
@store_option()
@click.pass_context
def chat(ctx: click.Context, prompt: str | None, resume_ref: str | None, model_name: str | None, agent: str,
         max_turns: int | None, timeout_s: float | None, permission_mode: str | None, allow: tuple[str, ...],
         deny: tuple[str, ...], sandbox_mode: str | None) -> int:
    """Talk with an agent in the terminal; PROMPT (optional) is your first message.

    Each message you write is a turn of one root agent; the conversation is a run in the store, so
    'subagents chat --resume ID' continues it after you leave (its id is printed at the start and the
    end). --max-turns and --timeout limit each turn.

    Background sub-agents keep working while you are at the prompt; the agents still working are shown
    under it. When one ends while you are idle, the conversation is told (as a follow-up turn) and its
    answer is printed; an answer that is exactly NO_REPLY prints nothing.

    Calls that need approval (file edits and shell commands in the default permission mode) are asked
    inline: y allow once, a allow for the rest of the chat, n deny.

    Commands: /agents (the tree), /cancel ID, /wait (for the background agents and the answers to them),
    /help, /exit. Ctrl-D leaves, Ctrl-C stops the current turn.

    Exit status: 0 when you leave, 2 usage or configuration error (no terminal, unknown agent or
    conversation, missing API key).
    """
    from ..config import load_settings
    from ..exceptions import ConfigError, UserError
    from ..runtime.limits import Limits
    from .preflight import check_agent, check_model

    if not (isatty(sys.stdin) and isatty(sys.stdout)):
        raise UserError("subagents chat needs a terminal (stdin and stdout); in scripts use subagents run "
                        "\"PROMPT\", and subagents runs resume ID \"MESSAGE\" to continue a run")
    cwd = workdir(ctx)
    settings = load_settings(cwd, overrides={"model_default": model_name, "permission_mode": permission_mode,
                                             "sandbox_mode": sandbox_mode})
    settings.engine_url = None  # the agents run in the chat's process, whatever [engine] url says
    model: Any = (ctx.find_root().obj or {}).get("model") or settings.model_default
    if model is None:
        raise ConfigError(NO_MODEL_HELP)
    if isinstance(model, str):
        check_model(model, settings.providers)
    check_agent(agent, cwd)
    limits_or_none = None if max_turns is None and timeout_s is None else Limits(max_turns=max_turns,
                                                                                   timeout_s=timeout_s)
    received: list[int] = []
    try:
        return asyncio.run(_chat(model, settings, cwd, agent=agent, limits=limits_or_none, first=prompt,
                                 resume_ref=resume_ref, store=store_url(ctx), allow=allow, deny=deny,
                                 received=received))
    except asyncio.CancelledError:
        if not received:
            raise
        name = signal.Signals(received[0]).name
        click.echo(f"Stopped by {name}: the agents were closed and recorded as interrupted; continue the "
                   "conversation with subagents chat --resume ID", err=True)
        return 128 + received[0]
    finally:
        from ..sandbox.shell import kill_all_process_groups

        kill_all_process_groups()  # nothing a command started outlives the chat


chat.params[-1:-1] = [p for p in _run_command.params if p.name in _SHARED]  # before --store


async def _chat(model: Any, settings: Settings, cwd: Path, *, agent: str, limits: Limits | None,
                first: str | None, resume_ref: str | None, store: str | None, allow: tuple[str, ...],
                deny: tuple[str, ...], received: list[int]) -> int:
    from prompt_toolkit import PromptSession

    from ..exceptions import UnconfinedShellWarning
    from ..runtime.runtime import Runtime
    from .approve import Notices
    from .chat_screen import ChatApprover, ChatAsk, Screen, TurnLines
    from .chat_session import ChatSession

    session: PromptSession[str] = PromptSession()
    screen = Screen(session)
    approver = ChatApprover(screen, ChatAsk(out=sys.stdout))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnconfinedShellWarning)
        rt = Runtime(model, workdir=cwd, settings=settings, store=store, approver=approver, allow=allow, deny=deny)
    async with rt:
        root_id = _conversation(rt, resume_ref)
        chat = ChatSession(rt, screen, agent=agent, limits=limits, root_id=root_id)
        if rt.sandbox_warning:
            screen.say(rt.sandbox_warning)
        rt.bus.on(screen)
        rt.bus.on(chat.on_event)
        rt.bus.on(Notices(screen.say))
        turn_lines = TurnLines(screen)
        rt.bus.on(lambda ev: turn_lines(ev) if chat.turning else None)
        screen.say(_greeting(rt, root_id))
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: _unhandled(screen, context))
        loop.add_signal_handler(signal.SIGINT, chat.interrupt)
        main = asyncio.current_task()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, _stop, rt, main, sig, received)
        announcer = asyncio.ensure_future(chat.announcer())
        try:
            if first is not None and first.strip():
                await chat.turn(first)
            await _prompt_loop(chat, session, screen)
        finally:
            announcer.cancel()
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                loop.remove_signal_handler(sig)
            _leave(rt, chat, stopped=bool(received))
    return 0


def _stop(rt: Runtime, main: asyncio.Task[Any] | None, sig: int, received: list[int]) -> None:
    """SIGTERM / SIGHUP: the agents are closed as interrupted (resumable) and the chat ends."""
    if not received and main is not None:
        received.append(sig)
        rt.interrupting(signal.Signals(sig).name)
        main.cancel()


def _unhandled(screen: Any, context: dict[str, Any]) -> None:
    """An error no one awaited (a bug): one line on the screen, the chat goes on (prompt_toolkit's own handler
    would stop the prompt at "Press ENTER to continue")."""
    exc = context.get("exception")
    what = f"{type(exc).__name__}: {exc}" if exc is not None else ""
    screen.say(f"subagents: internal error ({context.get('message', 'unhandled')}{': ' + what if what else ''}); "
               "the chat goes on — please report it")


def _conversation(rt: Runtime, ref: str | None) -> str | None:
    """The root run ``--resume`` names (checked: a root, finished), or None for a new conversation."""
    if ref is None:
        return None
    from ..exceptions import UserError
    from .runs import resolve_run

    rec = resolve_run(rt.store, ref)
    if rec.parent_id is not None:
        root = rt.store.get_run(rec.root_id or "")
        name = f"{root.nickname} ({root.run_id})" if root is not None else str(rec.root_id)
        raise UserError(f"{rec.nickname} ({rec.run_id}) is a sub-agent, not a conversation; resume its "
                        f"conversation: subagents chat --resume {root.run_id if root else rec.root_id} [{name}]")
    if not rec.is_final:
        raise UserError(f"conversation {rec.nickname} ({rec.run_id}) is still {rec.status} in another process; "
                        "wait for it (subagents runs wait ID) or cancel it (subagents runs cancel ID) first")
    return rec.run_id


def _greeting(rt: Runtime, root_id: str | None) -> str:
    if root_id is None:
        return "subagents chat: a new conversation (/help for commands, Ctrl-D to leave)"
    rec = rt.store.get_run(root_id)
    last = (rec.result_text or "").strip() if rec is not None else ""
    nick = rec.nickname if rec is not None else ""
    said = f"\nits last answer:\n{last if len(last) <= 600 else last[:599] + '…'}" if last else ""
    return f"subagents chat: conversation {root_id} ({nick}) continues (/help for commands){said}"


async def _prompt_loop(chat: ChatSession, session: Any, screen: Any) -> None:
    """Read the person's lines until /exit or Ctrl-D; each is a command or a turn."""
    while True:
        screen.prompting = True
        try:
            line: str = await session.prompt_async(PROMPT, bottom_toolbar=screen.toolbar, refresh_interval=0.5,
                                                   handle_sigint=False, set_exception_handler=False)
        except KeyboardInterrupt:
            continue  # Ctrl-C at the prompt: the line is dropped
        except EOFError:
            return
        finally:
            screen.prompting = False
        text = line.strip()
        if not text:
            continue
        if text.startswith("/") and not text.startswith("//"):
            if not await chat.command(text):
                return
            continue
        await chat.turn(text[1:] if text.startswith("//") else text)


def _leave(rt: Runtime, chat: ChatSession, *, stopped: bool) -> None:
    """Before the runtime closes: say what stops, and how to come back (``stopped``: by a signal)."""
    working = chat.working()
    if working:
        if not stopped:
            rt.interrupting("the chat ended")
        n = len(working)
        chat.screen.say(f"stopping {n} agent{'s' if n != 1 else ''} still working (recorded as interrupted)")
    if chat.root_id is not None:
        chat.screen.say(f"conversation {chat.root_id}: continue it with subagents chat --resume {chat.root_id}")
