"""A reaper for each command that runs without a PID namespace: nothing the command starts outlives it.

Without a PID namespace (the Landlock backend, ``mode = "off"``) a command's processes can leave its
process group (``setsid``), re-parent themselves to init (a double fork) and clear the environment that
would give them away (``env -i``).  So such a command is started through a small supervisor, two Perl
processes that cost ~2 ms (Perl is part of every Debian/Ubuntu base system; a Python supervisor would
cost ~20 ms per command):

- **the leader** (``S``): the process the runtime started, first of the command's process group; it only
  waits for the reaper and ends as the command did (same exit code, or killed by the same signal);
- **the reaper** (``R``), in a process group of its own: ``PR_SET_CHILD_SUBREAPER``, so every process
  the command starts, however it detaches, is re-parented to it, never to init; ``PR_SET_PDEATHSIG`` so
  that it learns when the leader is killed (the runtime killing the command's group at a timeout);
- **the command** (``C``): joins the leader's process group (the runtime's signals reach it as before),
  and under Landlock (ABI ≥ 6) enters a nested domain that scopes signals: it cannot signal the reaper or
  the leader (``kill -9 $PPID`` fails), nor ``ptrace`` them.

When the command ends, or the leader is killed, the reaper SIGKILLs its children again and again,
reaping each, until it has none left (a killed process's children are re-parented to it in turn), then
ends.  The command's ``SUBAGENTS_COMMAND`` tag (:data:`~.procs.TAG_VAR`) is set in the command's
environment only, so the runtime's tag sweep (a second line) never kills the reaper in the middle of
its work.

Limits: in ``mode = "off"`` and under Landlock before ABI 6 (Linux < 6.12), a command can kill the
reaper first, then detach; the tag sweep remains for those.  Supported where ``prctl``'s number is
known (x86-64, aarch64, riscv64) and ``perl`` is installed; :func:`supervisor_argv` returns ``None``
elsewhere.
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
from collections.abc import Sequence
from functools import cache

__all__ = ["REAPER_SCRIPT", "perl", "supervisor_argv"]

_PRCTL_NR = {"x86_64": 157, "amd64": 157, "aarch64": 167, "arm64": 167, "riscv64": 167}

REAPER_SCRIPT = r"""
my ($nr, $usr2, $scope) = splice(@ARGV, 0, 3); $0 = 'subagents: command';
my @edits; while (@ARGV && $ARGV[0] ne '--') { push @edits, shift @ARGV } shift @ARGV;
my ($leader, $group, $main, $status) = ($$, getpgrp(), 0, undef);
sub up { my $s = shift; $SIG{$_} = 'DEFAULT' for qw(TERM INT HUP USR2);
  if ($s & 127) { kill($s & 127, $$); select(undef, undef, undef, 0.05) } exit($s & 127 ? 128 + ($s & 127) : $s >> 8) }
$SIG{$_} = sub {} for qw(TERM INT HUP);
my $r = fork(); defined $r or die "subagents: cannot start the command: fork: $!\n";
if ($r) { close STDIN; close STDOUT; close STDERR; my $p; do { $p = waitpid($r, 0) } until $p == $r || $p < 0;
  up($p == $r ? $? : 137 << 8) }
sub kids { my @k; if (open(my $f, '<', "/proc/$$/task/$$/children")) { local $/; return split(' ', <$f> // '') }
  opendir(my $d, '/proc') or return (); for my $e (readdir $d) { next unless $e =~ /^\d+$/;
    open(my $f, '<', "/proc/$e/stat") or next; my $l = <$f> // '';
    push(@k, $e) if $l =~ /\)\s+\S+\s+(\d+)/ && $1 == $$ }
  return @k }
sub sweep { my $end = time + 30; while (1) { my @k = kids(); kill('KILL', @k) if @k; my $p;
    while (($p = waitpid(-1, 1)) > 0) { $status = $? if $p == $main && !defined $status }
    return if $p < 0 || time > $end; select(undef, undef, undef, 0.001) unless @k } }
setpgrp(0, 0); $0 = 'subagents: reaper';
my $reaping = syscall($nr + 0, 36, 1, 0, 0, 0) == 0;
$SIG{USR2} = sub { sweep(); exit 137 };
syscall($nr + 0, 1, $usr2 + 0, 0, 0, 0);
if (getppid() != $leader) { exit 137 }
$main = fork(); defined $main or die "subagents: cannot start the command: fork: $!\n";
if ($main == 0) { $SIG{$_} = 'DEFAULT' for qw(TERM INT HUP USR2); setpgrp(0, $group) or exit 137;
  for (@edits) { if (/^([^=]+)=(.*)$/s) { $ENV{$1} = $2 } else { delete $ENV{$_} } }
  if ($scope) { my $attr = pack('QQQ', 0, 0, 3); my $fd = syscall(444, $attr, 24, 0);
    if ($fd < 0 || syscall(446, $fd, 0) != 0) {
      print STDERR "subagents: cannot confine the command's signals: $!\n"; exit 126 } }
  exec { $ARGV[0] } @ARGV; print STDERR "$ARGV[0]: $!\n"; exit 127 }
close STDIN; close STDOUT; close STDERR;
until (defined $status) { my $p = waitpid(-1, 0); if ($p == $main) { $status = $? } elsif ($p < 0) { last } }
sweep() if $reaping; up($status // 0);
"""
"""The supervisor (see the module docstring).  Arguments: ``prctl``'s number, ``SIGUSR2``'s, ``1`` to scope
the command's signals with Landlock, environment edits for the command (``NAME=VALUE`` sets, ``NAME``
removes), ``--``, the command."""


@cache
def perl() -> str | None:
    """The ``perl`` binary the supervisor runs on, or ``None`` (no supervisor then)."""
    for candidate in ("/usr/bin/perl", "/bin/perl"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("perl")


def supervisor_argv(argv: Sequence[str], *, env: dict[str, str], command_only: Sequence[str], scope: bool
                    ) -> list[str] | None:
    """``argv`` wrapped in the supervisor, or ``None`` where it cannot run (no ``perl``, an unknown machine).

    ``env`` is the environment to start it with, changed here: the variables named in ``command_only`` (the tag)
    move to the command's own environment.  ``scope``: the command enters a Landlock domain of its own that
    scopes signals (ABI ≥ 6 only).
    """
    nr, binary = _PRCTL_NR.get(platform.machine().lower()), perl()
    if nr is None or binary is None or not os.path.isdir("/proc/self"):
        return None
    edits = [f"{k}={env.pop(k)}" for k in command_only if k in env]
    if "PERL_BADLANG" not in env:  # no "Setting locale failed" from Perl on every command (the command's own
        env["PERL_BADLANG"] = "0"  # environment does not get it)
        edits.append("PERL_BADLANG")
    return [binary, "-e", REAPER_SCRIPT, str(nr), str(int(signal.SIGUSR2)), "1" if scope else "0", *edits, "--",
            *argv]
