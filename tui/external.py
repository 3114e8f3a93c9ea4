"""Handing the terminal to another program: a pager, an editor or a shell, here or on the host
the files live on (`ssh -t`), then coming back to the console as it was.

Paths reach a remote shell only `shlex.quote`d; locally nothing goes through a shell at all.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from typing import TYPE_CHECKING

from textual.dom import DOMNode

from tui.context import console

if TYPE_CHECKING:
    from services.transport.ssh import HostSpec


def ssh_spec_of(source: object) -> HostSpec | None:
    """How a remote source reaches its host; None for local disk."""
    spec = getattr(source, "spec", None)
    if spec is None:
        return None  # local disk: asyncssh (~14 MiB) is never imported for it
    from services.transport.ssh import HostSpec

    return spec if isinstance(spec, HostSpec) else None


def pager() -> list[str]:
    return shlex.split(os.environ.get("PAGER") or "less -R")


def editor() -> list[str]:
    return shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")


def ssh_argv(spec: HostSpec, remote: Sequence[str], cwd: str | None = None) -> list[str]:
    """`ssh -t` to the host the way evaldesk reaches it, running `remote` (quoted) there."""
    argv = ["ssh", "-t"]
    if spec.ssh_config:
        argv += ["-F", os.path.expanduser(spec.ssh_config)]
    if spec.port:
        argv += ["-p", str(spec.port)]
    if spec.identity_file:
        argv += ["-i", os.path.expanduser(spec.identity_file)]
    if spec.proxy_jump:
        argv += ["-J", spec.proxy_jump]
    if spec.known_hosts:
        argv += ["-o", f"UserKnownHostsFile={os.path.expanduser(spec.known_hosts)}"]
    if spec.insecure_no_host_key_check:
        argv += ["-o", "StrictHostKeyChecking=no"]
    argv.append(f"{spec.user}@{spec.host}" if spec.user else spec.host)
    line = shlex.join(list(remote))
    if cwd:
        line = f"cd {shlex.quote(cwd)} && {line}"
    argv.append(line)
    return argv


def command_for(kind: str, path: str, spec: HostSpec | None) -> tuple[list[str], str | None]:
    """(argv, cwd) to view, edit or open a shell at `path`, on `spec`'s host when given.

    `kind`: "pager" | "editor" | "shell"; for "shell" `path` is the dir to start in.
    """
    if spec is None:
        if kind == "shell":
            return [os.environ.get("SHELL") or "/bin/sh"], path
        return [*(pager() if kind == "pager" else editor()), path], None
    if kind == "shell":
        # the remote login shell, started in the trial dir
        return ssh_argv(spec, ["sh", "-c", 'exec "${SHELL:-/bin/sh}" -l'], cwd=path), None
    remote = ["less", "-R", path] if kind == "pager" else ["vi", path]
    return ssh_argv(spec, remote), None


def missing(argv: Sequence[str]) -> str | None:
    """Why `argv` cannot start here (its program is not on PATH), or None."""
    if argv and shutil.which(argv[0]) is None:
        return f"{argv[0]} is not installed here"
    return None


def run_foreground(argv: Sequence[str], cwd: str | None = None) -> int:
    """Run a program on the terminal (the console is suspended by the caller)."""
    return subprocess.call(list(argv), cwd=cwd)


def location(source: object, path: str) -> str:
    """A path as a person would paste it: `user@host:path` for a remote source."""
    spec = ssh_spec_of(source)
    return f"{spec.label}:{path}" if spec is not None else path


def copy_location(node: DOMNode, key: str, path: str) -> None:
    """`y`: the path (with its host) to the clipboard — OSC 52, so it reaches the terminal
    the person sits at even over ssh."""
    try:
        source = console(node).source_for(key)
    except KeyError:
        source = None
    text = location(source, path)
    node.app.copy_to_clipboard(text)
    node.app.notify(f"copied {text}", timeout=3, markup=False)
