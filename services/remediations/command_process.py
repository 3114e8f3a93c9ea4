"""A job command's process: started behind a short shell prologue that says who it is, and
asked about later by whoever finds its record unfinished.

A resume's command can outlive evaldesk (kill -9, a closed laptop, a dropped connection):
Harbor keeps running, and putting trials back under it, or starting a second one beside it,
loses trials. So before the command starts, its step is marked *starting* in the record with
a tag; the prologue then

- prints one line on stderr, `evaldesk-started PID PGID IDENTITY` (IDENTITY: the boot id and
  the process's start time in clock ticks, from /proc; elsewhere `ps -o lstart=`), which the
  record keeps as *started*;
- reads `env NAME=VALUE` lines and a `go` line from its stdin and exports them, so values
  reach the command without a file, the process list or SSH's channel environment (which a
  stock sshd without AcceptEnv drops);
- exports `EVALDESK_STEP=<tag>`, inherited by everything the command starts, and execs it.

The pid stays the command's through the `exec`. A process is *gone* when no process with
that pid and start time lives and none carries the tag in its environment; a host that
cannot be asked, or has neither /proc nor ps, leaves it *unknown*: only a person can say.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from typing import Literal

from services.core.source import SourceUnavailable
from services.transport.process import Runner

TAG_VAR = "EVALDESK_STEP"
MARK = "evaldesk-started"
# exit code of the prologue when its stdin ended before `go` (evaldesk died first): nothing ran
NOT_RELEASED = 125

_IDENT = r"""ident() {
  if [ -r "/proc/$1/stat" ]; then
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    s=${s##*) }
    set -- $s
    [ "$1" = Z ] && return 0
    echo "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null):${20}"
  else
    ps -o lstart= -p "$1" 2>/dev/null
  fi
}
"""

PROLOGUE = _IDENT + r"""g=$(ps -o pgid= -p $$ 2>/dev/null | tr -d ' ')
printf '%s %s %s %s\n' evaldesk-started "$$" "${g:-?}" "$(ident $$ | tr ' ' '_')" >&2
while IFS= read -r line; do
  case $line in
    go) exec "$@" </dev/null ;;
    "env "*=*) kv=${line#env }; export "${kv%%=*}=${kv#*=}" ;;
  esac
done
exit 125
"""

# $1 pid (or empty) $2 identity $3 tag: prints alive, gone or unknown
CHECK = _IDENT + r"""if [ -n "$1" ] && [ -n "$2" ] && [ "$(ident "$1" | tr ' ' '_')" = "$2" ]; then
  echo alive; exit 0
fi
if [ -d /proc/self ]; then
  if grep -qszxF "EVALDESK_STEP=$3" /proc/[0-9]*/environ; then echo alive; exit 0; fi
  echo gone; exit 0
fi
if [ -n "$1" ] && command -v ps >/dev/null 2>&1; then echo gone; exit 0; fi
echo unknown
"""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def new_tag(record: str) -> str:
    return f"{record}.{secrets.token_hex(6)}"


def wrapped(argv: list[str], tag: str) -> list[str]:
    """The argv that runs `argv` behind the prologue (the tag is `$0`, so `ps` shows it)."""
    return ["sh", "-c", f"export {TAG_VAR}={tag}\n" + PROLOGUE, f"evaldesk-{tag}", *argv]


def bad_env_values(env: Mapping[str, str]) -> list[str]:
    """Names whose value cannot travel as one line (a newline or NUL in it), or whose name is
    not a shell variable name."""
    return [k for k, v in env.items() if not _NAME.match(k) or "\n" in v or "\0" in v or "\r" in v]


def release(env: Mapping[str, str]) -> bytes:
    """What the prologue reads on stdin: the values, then `go`."""
    return "".join(f"env {k}={v}\n" for k, v in env.items()).encode("utf-8", "surrogateescape") + b"go\n"


def parse_mark(line: str) -> dict[str, object] | None:
    parts = line.strip().split(" ")
    if len(parts) != 4 or parts[0] != MARK or not parts[1].isdigit():
        return None
    return {"pid": int(parts[1]), "pgid": int(parts[2]) if parts[2].isdigit() else None, "identity": parts[3]}


class MarkFilter:
    """Takes the prologue's line off the front of stderr; everything else passes on."""

    def __init__(self) -> None:
        self.buf = ""
        self.done = False
        self.found: dict[str, object] | None = None

    def feed(self, text: str) -> str:
        if self.done:
            return text
        self.buf += text
        if "\n" not in self.buf:
            if len(self.buf) > 4096:  # not ours: pass it on
                self.done, out, self.buf = True, self.buf, ""
                return out
            return ""
        line, rest = self.buf.split("\n", 1)
        self.done, self.buf = True, ""
        self.found = parse_mark(line)
        return rest if self.found is not None else line + "\n" + rest


Liveness = Literal["alive", "gone", "unknown"]


async def liveness(runner: Runner, started: Mapping[str, object]) -> tuple[Liveness, str]:
    """Whether the command a step started may still run where `runner` runs: (answer, why
    when unknown)."""
    pid = started.get("pid")
    try:
        res = await runner.run(["sh", "-c", CHECK, "evaldesk-check", str(pid or ""),
                                str(started.get("identity") or ""), str(started.get("tag") or "")], timeout_s=60)
    except (SourceUnavailable, OSError) as exc:
        return "unknown", str(exc)
    if res.error:
        return "unknown", res.error
    word = (res.stdout_tail.strip().splitlines() or [""])[-1]
    if word in ("alive", "gone"):
        return word, ""  # type: ignore[return-value]
    return "unknown", "that host has neither /proc nor ps to ask"


def describe(started: Mapping[str, object], program: str) -> str:
    where = started.get("host") or "this machine"
    pid = started.get("pid")
    who = f"pid {pid}" + (f", process group {started['pgid']}" if started.get("pgid") else "") if pid else \
        f"its pid never reached the record; it carries {TAG_VAR}={started.get('tag')}"
    return f"`{program}` on {where} ({who}, started {started.get('at', '?')})"


def stop_hint(started: Mapping[str, object]) -> str:
    if started.get("pgid"):
        return f"kill -TERM -- -{started['pgid']}"
    if started.get("pid"):
        return f"kill -TERM {started['pid']}"
    return f"grep -lzxF {TAG_VAR}={started.get('tag')} /proc/*/environ"
