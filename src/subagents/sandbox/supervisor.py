"""A reaper for each command that runs without a PID namespace: nothing the command starts outlives it.

Without a PID namespace (the Landlock backend, ``mode = "off"``) a command's processes can leave its
process group (``setsid``), re-parent themselves to init (a double fork) and clear the environment that
would give them away (``env -i``).  So such a command is started through a small supervisor, two Perl
processes that cost ~6 ms (Perl is part of every Debian/Ubuntu base system; a Python supervisor would
cost ~20 ms per command):

- **the leader** (``S``): the process the runtime started, first of the command's process group; it only
  waits for the reaper and ends as the command did (same exit code, or killed by the same signal; with core
  dumps off, so that no core file of Perl's replaces the command's).  It also watches the runtime (a pidfd):
  should the runtime end without killing the group (``SIGKILL``, a crash), it ends, and the reaper sweeps.
  The group's ``SIGTERM``, ``SIGINT`` and ``SIGHUP`` end it too until the command has joined the group (so a
  command killed as it starts never runs), and are the command's alone after;
- **the reaper** (``R``), in a process group of its own: ``PR_SET_CHILD_SUBREAPER``, so every process
  the command starts, however it detaches, is re-parented to it, never to init; ``PR_SET_PDEATHSIG`` so
  that it learns when the leader is killed (the runtime killing the command's group at a timeout);
- **the command** (``C``): joins the leader's process group (the runtime's signals reach it as before),
  and under Landlock (ABI ≥ 6) enters a nested domain that scopes signals: it cannot signal the reaper or
  the leader (``kill -9 $PPID`` fails), nor ``ptrace`` them, and a seccomp filter keeps it from setting
  their resource limits (``prlimit --pid $PPID --cpu=0`` would end the reaper as surely as a signal).
  Under Landlock it also gets a seccomp filter whose calls on other processes (scheduling; signals before ABI 6)
  the **reaper** decides on (:mod:`.signals`): only the command's own; and whose ``chmod`` calls the reaper
  carries out itself where the command may write, refuses elsewhere.  The command makes it before it runs
  anything and sends its listener to the reaper (``SCM_RIGHTS`` over a socket pair); the reaper answers while
  the command runs, then closes it (what the command leaves gets ``ENOSYS``).

The supervisor's processes are not dumpable (``PR_SET_DUMPABLE`` 0; the command's ``exec`` makes it dumpable
again): a command, which runs without ``CAP_SYS_PTRACE``, cannot ``ptrace`` them nor open their
``/proc/<pid>/mem`` — which without the nested domain (Landlock before ABI 6) it could have done to make the reaper
leave or allow anything.

When the command ends, what is left of its process group gets ``SIGTERM`` (unless that is what ended
the command: the runtime sent it to the group) and up to a second to end, as the runtime's own kill gives
it (:data:`~.shell.KILL_GRACE_S`).  Then, or as soon as the leader is killed, the reaper SIGKILLs its
children again and again, reaping each, until it has none left (a killed process's children are
re-parented to it in turn), then ends.  The command's ``SUBAGENTS_COMMAND`` tag (:data:`~.procs.TAG_VAR`)
is set in the command's environment only, so the runtime's tag sweep (a second line) never kills the
reaper in the middle of its work.  Perl's own variables (``PERL5OPT``, ``PERL_UNICODE``...) move to the
command's environment too: the supervisor runs without them.

Limits: in ``mode = "off"`` a command can kill the reaper first, then detach; the tag sweep remains for that.
Supported where ``prctl``'s number is known (x86-64, aarch64, riscv64) and ``perl`` is installed;
:func:`supervisor_argv` returns ``None`` elsewhere.
"""

from __future__ import annotations

import errno
import os
import platform
import shutil
import signal
import struct
from collections.abc import Sequence
from functools import cache

from .signals import LISTENER_CALLS, carried_calls, handled_calls, signal_filter

__all__ = ["REAPER_SCRIPT", "no_prlimit_filter", "perl", "supervisor_argv"]

_X86 = ((0xC000003E, 302), (0xC000003E, 0x40000000 | 302), (0x40000003, 340))
_ARM = ((0xC00000B7, 261), (0x40000028, 369))
_RISCV = ((0xC00000F3, 261), (0x400000F3, 261))
_MACHINES = {"x86_64": (157, _X86), "amd64": (157, _X86), "aarch64": (167, _ARM), "arm64": (167, _ARM),
             "riscv64": (167, _RISCV)}
"""Machine: ``prctl``'s number, and ``(AUDIT_ARCH_*, prlimit64's number)`` for each ABI a process can use
there (x86-64: native, x32, i386; aarch64: native, 32-bit ARM; riscv64: native, rv32)."""

REAPER_SCRIPT = r"""
my ($nr, $usr2, $scope, $runtime, $signals, $calls, $kinds, $areas) = splice(@ARGV, 0, 8); $0 = 'subagents: command';
my ($seccomp, $sendmsg, $recvmsg, $close) = split(/,/, $calls);
my %kind = map { split(/:/, $_, 2) } grep { /:/ } split(/,/, $kinds);
my ($opath, $nofollow, $utimensat, $setxattr, $removexattr, $fchownat, @area) = $areas eq '-' ? ()
  : split(/,/, $areas);
my ($tmp, $ws, @ro) = map { $_ eq '-' ? '' : pack('H*', $_) } @area;  # where it may write: the temp dir, the
# workspace, what in it it may not
my @edits; while (@ARGV && $ARGV[0] ne '--') { push @edits, shift @ARGV } shift @ARGV;
syscall($nr + 0, 4, 0, 0, 0, 0);  # not dumpable (the reaper too, and the command until its exec)
my ($leader, $group, $main, $status) = ($$, getpgrp(), 0, undef);
sub up { my $s = shift; if ($s & 127) { $SIG{$_} = 'DEFAULT' for keys %SIG; syscall($nr + 0, 4, 0, 0, 0, 0);
    kill($s & 127, $$); select(undef, undef, undef, 0.05) } exit($s & 127 ? 128 + ($s & 127) : $s >> 8) }
my $rt = syscall(434, $runtime + 0, 0); exit 137 if getppid() != $runtime;
$SIG{USR1} = sub { $SIG{$_} = sub {} for qw(TERM INT HUP) };
my $r = fork(); defined $r or die "subagents: cannot start the command: fork: $!\n";
if ($r) { close STDIN; close STDOUT; close STDERR; my ($rp, $v, $o, $p) = (syscall(434, $r, 0), '');
  if ($rt >= 0 && $rp >= 0) { vec($v, $_, 1) = 1 for $rt, $rp;
    1 until select($o = $v, undef, undef, undef) > 0; exit 137 unless vec($o, $rp, 1) }
  do { $p = waitpid($r, 0) } until $p == $r || $p < 0;
  up($p == $r ? $? : 137 << 8) }
sub stat_of { open(my $f, '<', "/proc/$_[0]/stat") or return (); my $l = <$f> // '';
  return $l =~ /.*\)\s+(\S+)\s+(\d+)\s+(\d+)/s ? ($1, $2, $3) : () }
sub kids { if (open(my $f, '<', "/proc/$$/task/$$/children")) { local $/; return split(' ', <$f> // '') }
  opendir(my $d, '/proc') or return (); return grep { /^\d+$/ && ((stat_of($_))[1] // 0) == $$ } readdir $d }
sub rest { for (kids()) { my @s = stat_of($_); return 1 if @s && $s[0] !~ /[ZX]/ && $s[2] == $group } return 0 }
sub grace { return if $group != $leader || waitpid(-1, 1) < 0 || !rest();
  if (($status & 127) != 15 && opendir(my $d, '/proc')) {  # the group but its leader (it may not ignore it yet)
    kill('TERM', grep { /^\d+$/ && $_ != $leader && ((stat_of($_))[2] // 0) == $group } readdir $d) }
  my ($end, $t) = (time + 2, 0.001);
  for (1 .. 100) { last if time > $end || !rest(); select(undef, undef, undef, $t); $t = 0.01 if ($t *= 2) > 0.01 } }
sub sweep { my $end = time + 30; while (1) { my @k = kids(); kill('KILL', @k) if @k; my $p;
    while (($p = waitpid(-1, 1)) > 0) { $status = $? if $p == $main && !defined $status }
    return if $p < 0 || time > $end; select(undef, undef, undef, 0.001) unless @k } }
sub mine { my ($p, $r, $n) = (@_, 0); return 0 if $p == $r; my @s = stat_of($p) or return -1;
  while ($n++ < 4096) { $p = $s[1]; return 1 if $p == $r; return 0 if $p <= 1; @s = stat_of($p) or return 0 } 0 }
sub verdict { my ($t, $r) = @_; return 0 if $t == 0 || $t == -$group; return 1 if $t == -1;
  if ($t > 0) { my $m = mine($t, $r); return $m > 0 ? 0 : $m < 0 ? 3 : 1 }
  opendir(my $d, '/proc') or return 1; my $any = 0;
  for (grep { /^\d+$/ } readdir $d) { my @s = stat_of($_); next unless @s && $s[2] == -$t;
    $any = 1; return 1 if mine($_, $r) <= 0 }
  return $any ? 0 : 3 }
my $CARRY = <<'CARRY';  # compiled at its first call (~0.4 ms a command otherwise)
sub may_write { my $r = shift; return 1 if $tmp && ($r eq $tmp || index($r, "$tmp/") == 0);
  return 0 if !$ws || index($r, "$ws/") != 0; for (@ro) { return 0 if $r eq $_ || index("$r/", "$_/") == 0
    || index($_, "$r/") == 0 } 1 }
sub mem { my ($t, $at, $n) = @_; my $b; open(my $m, '<:raw', "/proc/$t/mem") or return;
  return $b if sysseek($m, $at, 0) && (sysread($m, $b, $n) // -1) == $n; $! = 14 unless $! == 1 || $! == 13; return }
sub cstr { my ($t, $at, $max) = @_; open(my $m, '<:raw', "/proc/$t/mem") or return; my ($s, $b) = ('', '');
  while (length($s) < $max) { my $o = $at + length($s); sysseek($m, $o, 0) or return;  # by 256 bytes: no page
    return unless sysread($m, $b, 256 - $o % 256);  # crossed in one read
    my $z = index($b, "\0"); return $s . substr($b, 0, $z) if $z >= 0; $s .= $b } $! = $max > 256 ? 36 : 34; return }
sub fault { $! == 36 || $! == 34 ? $! + 0 : $! == 1 || $! == 13 ? 1 : 14 }  # (not dumpable: EPERM)
sub carry { my ($l, $id, $k, $t, @x) = @_;  # a call it carries out: the errno to answer (undef: its caller is gone)
  my ($d, $at, $fl, @a) = $k =~ /[mxXrRoO]/ ? (-100, $x[0], $k =~ /[XRO]/ ? 0x100 : 0, @x[1 .. 4])
    : $k =~ /[dyzq]/ ? ($x[0], 0, 0x1000, @x[1 .. 4])
    : ($x[0], $x[1], $k eq 'a' ? 0 : $k eq 'Q' ? $x[4] : $x[3], @x[2 .. 3]);
  $d = unpack('l', pack('L', $d & 0xffffffff)); return 22 if $fl & ~0x1100;
  my ($p, $v, $name) = ('');
  if ($at || $k !~ /[dyzuq]/) { $p = cstr($t, $at, 4096) // return fault() } else { $fl |= 0x1000 }
  if ($k eq 'u') { $v = $a[0] ? mem($t, $a[0], 32) // return fault() : 0 }  # two timespecs, or now
  elsif ($k =~ /[xXyrRz]/) { $name = cstr($t, $a[0], 256) // return fault(); return 34 if $name eq '';
    if ($k =~ /[xXy]/) { return 7 if $a[2] > 65536; $v = $a[2] ? mem($t, $a[1], $a[2]) // return fault() : '' } }
  $p =~ s{^/proc/(?:thread-)?self(?=/|$)}{/proc/$t};  # its own (glibc's lchmod: /proc/self/fd/N), not the reaper's
  return 2 if $p eq '' && !($fl & 0x1000); return unless ioctl($l, 0x40082102, pack('Q', $id));  # still waiting
  my $base = $d == -100 ? "/proc/$t/cwd" : "/proc/$t/fd/$d";
  return 9 if ($p !~ m{^/} || $p eq '') && $d != -100 && !-e $base;
  sysopen(my $h, $p =~ m{^/} ? $p : $p eq '' ? $base : "$base/$p", $opath | ($fl & 0x100 ? $nofollow : 0))
    or return $! + 0;
  my $f = '/proc/self/fd/' . fileno($h); my $r = readlink($f) // return 1;
  return 1 if $r !~ m{^/} || !may_write($r); my $link = (((stat($h))[2] // 0) & 0170000) == 0120000;
  my $e = '';  # (a string syscall() is given must be writable: a literal would end the reaper)
  return syscall($fchownat + 0, fileno($h), $e, $a[0] + 0, $a[1] + 0, 0x1000) == 0 ? 0 : $! + 0 if $k =~ /[oOqQ]/;
  if ($k eq 'u') { return 0 if syscall($utimensat + 0, fileno($h), $e, $v, 0x1000) == 0;  # (Linux < 5.8: EINVAL)
    return $! == 22 && !$link && syscall($utimensat + 0, -100, $f, $v, 0) == 0 ? 0 : $! + 0 }
  return $k =~ /[mdaM]/ ? 95 : 1 if $link;  # a symlink's own mode (EOPNOTSUPP) or attributes
  return chmod($a[0] & 07777, $f) ? 0 : $! + 0 if $k =~ /[mdaM]/;
  (($k =~ /[xXy]/ ? syscall($setxattr + 0, $f, $name, $v, length($v), $a[3] + 0)
    : syscall($removexattr + 0, $f, $name)) == 0) ? 0 : $! + 0 }
CARRY
sub answer { my $n = "\0" x 256;  # one call on with it, or refused: 1; 0: none (its caller was killed, or the
  unless (ioctl($_[0], 0xC0502100, $n)) { return $! == 4 || $! == 2 ? 0 : undef }  # command is gone); undef: error
  my ($id, $call, $arch, $a0, $a1, $a2) = unpack('Q x8 l L x8 l x4 l x4 l', $n); my $k = $kind{"$arch/$call"} // '';
  if ($k =~ /^[mdaMuxXyrRzoOqQ]$/) { eval "$CARRY; 1" unless defined &carry;
    my $e = eval { carry($_[0], $id, $k, unpack('x8 L x20 Q5', $n)) } // ($@ ? 1 : undef);
    return 1 unless defined $e;
    ioctl($_[0], 0xC0182101, pack('Q q l L', $id, 0, -$e, 0) . ("\0" x 232)); return 1 }
  my $e = $k eq 'f' ? verdict($a2, $$) : $k eq 'p' ? ($a0 == 0 ? verdict($a1, $$) : $a0 == 1 ? verdict(-$a1, $$) : 1)
    : $k eq 'i' ? ($a0 == 1 ? verdict($a1, $$) : $a0 == 2 ? verdict(-$a1, $$) : 1) : verdict($a0, $$);
  my $a = pack('Q q l L', $id, 0, -$e, $e ? 0 : 1) . ("\0" x 232); ioctl($_[0], 0xC0182101, $a); 1 }
sub serve { my ($fd, $pf, $none) = @_; open(my $l, '+<&=', $fd) or return; return if $pf < 0;
  my ($v, $w, $o) = ('', ''); vec($w, $pf, 1) = 1; $v = $w; vec($v, $fd, 1) = 1;
  while (1) {  # after a wake for no call, the listener is left out for 10 ms: it is readable for good once the
    my $n = select($o = $none ? $w : $v, undef, undef, $none ? 0.01 : 1);  # command is gone, before it can be reaped
    while ((my $p = waitpid(-1, 1)) > 0) { $status = $? if $p == $main }
    return if defined $status; $none = 0; next unless $n > 0 && vec($o, $fd, 1) && !vec($o, $pf, 1);
    my $a = answer($l); return unless defined $a; $none = !$a } }
setpgrp(0, 0); $0 = 'subagents: reaper'; $SIG{$_} = sub {} for qw(TERM INT HUP);
my $reaping = syscall($nr + 0, 36, 1, 0, 0, 0) == 0;
$SIG{USR2} = sub { sweep(); exit 137 };
syscall($nr + 0, 1, $usr2 + 0, 0, 0, 0);
if (getppid() != $leader) { exit 137 }
my ($sr, $sc);  # the command sends its listener to the reaper: a socket pair (AF_UNIX, SOCK_STREAM)
if ($signals) { socketpair($sr, $sc, 1, 1, 0) or die "subagents: cannot start the command: socketpair: $!\n" }
$main = fork(); defined $main or die "subagents: cannot start the command: fork: $!\n";
if ($main == 0) { $SIG{$_} = 'DEFAULT' for qw(TERM INT HUP USR1 USR2); setpgrp(0, $group) or exit 137;
  kill('USR1', $leader);
  for (@edits) { if (/^([^=]+)=(.*)$/s) { $ENV{$1} = $2 } else { delete $ENV{$_} } }
  if ($scope) { my ($attr, $f) = (pack('QQQ', 0, 0, 3), pack('H*', $scope)); my $fd = syscall(444, $attr, 24, 0);
    my $prog = pack('S x![P] P', length($f) / 8, $f);
    if ($fd < 0 || syscall(446, $fd, 0) != 0 || syscall($nr + 0, 22, 2, $prog, 0, 0) != 0) {
      print STDERR "subagents: cannot confine the command: $!\n"; exit 126 } }
  if ($signals) { my ($f, $x) = (pack('H*', $signals), 'x'); my $prog = pack('S x![P] P', length($f) / 8, $f);
    close $sr; my $fd = syscall($seccomp + 0, 1, 8, $prog);  # SECCOMP_SET_MODE_FILTER, NEW_LISTENER; then SCM_RIGHTS
    my ($iov, $ctl) = (pack('P Q', $x, 1), pack('Q l l l x4', 20, 1, 1, $fd));  # one byte, the listener (msghdr:)
    my $msg = pack('Q L x4 P Q P Q l x4', 0, 0, $iov, 1, $ctl, 24, 0);
    if ($fd < 0 || syscall($sendmsg + 0, fileno($sc), $msg, 0) != 1) {
      print STDERR "subagents: cannot confine the command's calls on other processes: $!\n"; exit 126 } }
  exec { $ARGV[0] } @ARGV; print STDERR "$ARGV[0]: $!\n"; exit 127 }
close STDIN; close STDOUT; close STDERR;
if ($signals) { close $sc; my ($x, $ctl) = ("\0", "\0" x 24); vec($x, 0, 8) = 0; vec($ctl, 0, 8) = 0;  # unshared
  my $iov = pack('P Q', $x, 1);  # the kernel writes the listener's number into $ctl (MSG_CMSG_CLOEXEC)
  my $n = syscall($recvmsg + 0, fileno($sr), pack('Q L x4 P Q P Q l x4', 0, 0, $iov, 1, $ctl, 24, 0), 0x40000000);
  close $sr; my (undef, $level, $type, $fd) = unpack('Q l l l', $ctl);
  if ($n == 1 && $level == 1 && $type == 1) {  # closed after: what the command leaves gets ENOSYS (fails closed)
    my $pf = syscall(434, $main, 0); serve($fd, $pf); syscall($close + 0, $_) for grep { $_ >= 0 } $fd, $pf } }
until (defined $status) { my $p = waitpid(-1, 0); if ($p == $main) { $status = $? } elsif ($p < 0) { last } }
if ($reaping) { grace(); sweep() } up($status // 0);
"""
"""The supervisor (see the module docstring).  Arguments: ``prctl``'s number, ``SIGUSR2``'s, ``0`` or the
seccomp filter (hex) that the command gets with Landlock's signal scope, the runtime's PID, ``0`` or the seccomp
filter (hex) whose calls on other processes the reaper decides on (:mod:`.signals`), the numbers of ``seccomp``,
``sendmsg``, ``recvmsg`` and ``close`` (:data:`.signals.LISTENER_CALLS`), the calls whose target is not their
first argument or that it carries out (:func:`.signals.handled_calls`), ``-`` or where the command may change modes
(:func:`_areas`), environment edits for the command (``NAME=VALUE`` sets, ``NAME``
removes), ``--``, the command."""


@cache
def perl() -> str | None:
    """The ``perl`` binary the supervisor runs on, or ``None`` (no supervisor then)."""
    for candidate in ("/usr/bin/perl", "/bin/perl"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("perl")


def supervisor_argv(argv: Sequence[str], *, env: dict[str, str], command_only: Sequence[str], landlock: bool,
                    write_areas: Sequence[str] = ()) -> list[str] | None:
    """``argv`` wrapped in the supervisor, or ``None`` where it cannot run (no ``perl``, an unknown machine).

    ``env`` is the environment to start it with, changed here: the variables named in ``command_only`` (the tag)
    move to the command's own environment.  ``landlock``: the command runs under Landlock; with ABI ≥ 6 it
    enters a Landlock domain of its own that scopes signals, before that its signals are decided on by the
    reaper, as its scheduling calls on other processes are on every ABI (:mod:`.signals`).
    """
    machine, binary = _MACHINES.get(platform.machine().lower()), perl()
    if machine is None or binary is None or not os.path.isdir("/proc/self"):
        return None
    if landlock:
        from .landlock import abi_version

        scope = abi_version() >= 6
    else:
        scope = False
    # Perl's own settings (PERL5OPT, PERL_UNICODE...) are the command's: the supervisor runs without them
    names = [k for k in command_only if k in env] + [k for k in env if k.startswith("PERL") and k not in command_only]
    edits = [f"{k}={env.pop(k)}" for k in names]
    if "PERL_BADLANG" not in names:
        edits.append("PERL_BADLANG")
    env["PERL_BADLANG"] = "0"  # no "Setting locale failed" from Perl on every command
    signals = (signal_filter(signals=not scope) if landlock else None) or "0"
    return [binary, "-e", REAPER_SCRIPT, str(machine[0]), str(int(signal.SIGUSR2)),
            _no_prlimit(machine[1]) if scope else "0", str(os.getpid()), signals,
            LISTENER_CALLS.get(platform.machine().lower(), "0,0,0,0"), handled_calls() or "-",
            _areas(write_areas) if landlock else "-", *edits, "--", *argv]


def _areas(write_areas: Sequence[str]) -> str:
    """The reaper's argument for the calls it carries out (``chmod``...): ``O_PATH``, ``O_NOFOLLOW``, the numbers of
    ``utimensat``, ``setxattr`` and ``removexattr``, then :attr:`.landlock.Ruleset.write_areas` in hex (``-``:
    empty)."""
    flags = f"{getattr(os, 'O_PATH', 0o10000000)},{os.O_NOFOLLOW},{carried_calls()}"
    return ",".join((flags, *(os.fsencode(a).hex() or "-" for a in write_areas)))


def no_prlimit_filter() -> bytes | None:
    """The seccomp program of :func:`_no_prlimit` for this machine (``struct sock_filter`` s), ``None`` elsewhere."""
    machine = _MACHINES.get(platform.machine().lower())
    return None if machine is None else bytes.fromhex(_no_prlimit(machine[1]))


def _no_prlimit(abis: tuple[tuple[int, int], ...]) -> str:
    """A seccomp filter, in hex: ``prlimit64`` setting a limit of another process fails with ``EPERM``.

    Landlock does not cover it, and a command could end its reaper that way (``prlimit --pid $PPID --cpu=0``),
    or starve the runtime of file descriptors.  Queries, and limits of the caller itself (``pid`` 0:
    ``ulimit``, ``prlimit --nofile=N command``) pass.
    """
    ld, jeq, ret, allow, eperm = 0x20, 0x15, 0x06, 0x7FFF0000, 0x00050000 | errno.EPERM
    n, prog = 4 * len(abis), []
    for i, (arch, nr) in enumerate(abis):  # (code, jt, jf, k); a jump lands 1 + offset further on
        prog += [(ld, 0, 0, 4), (jeq, 0, 2, arch), (ld, 0, 0, 0), (jeq, n - 4 * i - 3, 0, nr)]
    prog += [(ret, 0, 0, allow),
             (ld, 0, 0, 16), (jeq, 5, 0, 0),  # pid 0: the caller
             (ld, 0, 0, 32), (jeq, 0, 2, 0), (ld, 0, 0, 36), (jeq, 1, 0, 0),  # no new limit: a query
             (ret, 0, 0, eperm), (ret, 0, 0, allow)]
    return b"".join(struct.pack("<HBBI", *insn) for insn in prog).hex()
