"""The commands a site uses to resume or re-run a job, and where they run.

A command comes from the config (`[commands]`, or `[hosts.commands]` / `[sources.commands]`
for one host or source) as a template: one string, split the way a shell would split it
*before* any placeholder is filled in, or a list of argv elements. Placeholders are filled in
per element, so a path with spaces or quotes stays one argument and nothing is ever pasted
into a shell line:

    {job_dir} {job_name} {jobs_dir}      the job being resumed (jobs_dir: its parent)
    {new_job_name} {new_job_dir}         a re-run's fresh job
    {types}                              the exception types set aside: alone as an element it
                                         becomes one element per type, inside one it is
                                         comma-joined
    {type}                               the element (or a nested list of elements) is repeated
                                         once per type: ["-f", "{type}"] → -f A -f B

The runner comes from the source (`runner()`: this machine, or the SSH host over its pooled
connection), so nothing here knows which backend a source belongs to.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence

from services.core.config import CommandConfig, CommandTemplate, Config
from services.core.source import Source, SourceUnavailable
from services.transport.process import LocalRunner, Runner

_FIELD = re.compile(r"\{([a-z_]+)\}")
FIELDS = ("job_dir", "job_name", "jobs_dir", "types", "type", "new_job_name", "new_job_dir")


class TemplateError(ValueError):
    """A command template that cannot be filled in; the message names the template."""


def _fill(element: str, values: Mapping[str, str], where: str) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in values:
            known = ", ".join("{" + f + "}" for f in FIELDS)
            raise TemplateError(f"{where}: unknown placeholder {{{name}}} in {element!r} (known: {known})")
        return values[name]

    return _FIELD.sub(sub, element)


def expand(template: CommandTemplate, values: Mapping[str, str], types: Sequence[str] = (),
           where: str = "command") -> list[str]:
    """The argv a template stands for. Raises TemplateError naming `where`."""
    if isinstance(template, str):
        try:
            parts: list[str | list[str]] = list(shlex.split(template))
        except ValueError as exc:
            raise TemplateError(f"{where}: cannot split {template!r}: {exc}") from None
    else:
        parts = list(template)
    base = {**values, "types": ",".join(types)}
    argv: list[str] = []
    for part in parts:
        group = part if isinstance(part, list) else [part]
        if isinstance(part, list) or any("{type}" in p for p in group):
            for t in types:  # repeated once per type; nothing when no type was set aside
                argv += [_fill(p, {**base, "type": t}, where) for p in group]
            continue
        element = group[0]
        if element == "{types}":
            argv += list(types)
            continue
        argv.append(_fill(element, base, where))
    if not argv or not argv[0]:
        raise TemplateError(f"{where}: the command is empty")
    return argv


def commands_for(source: Source, config: Config) -> CommandConfig:
    """The commands of the host or source `source` reads from, else the config's defaults."""
    own = getattr(source, "commands", None)
    if isinstance(own, CommandConfig):  # a source that carries its own (an object store's `[[stores]]` entry)
        return own
    spec = getattr(source, "spec", None)
    host = getattr(spec, "host", None)
    if isinstance(host, str):
        for hc in config.hosts:
            if host in (hc.host, hc.name) or source.label.startswith(f"{hc.name}:"):
                return hc.commands or config.commands
        return config.commands
    root = getattr(source, "root", None)
    for entry in config.sources:
        if entry.commands is None:
            continue
        if entry.name == source.label or (isinstance(root, str) and entry.path and
                                          os.path.abspath(os.path.expanduser(entry.path)) == root):
            return entry.commands
    return config.commands


def runner_of(source: Source) -> Runner:
    """Where a source's commands run: its own runner (the SSH host it reads from), else this
    machine for a source on local disk."""
    make = getattr(source, "runner", None)
    if callable(make):
        runner = make()
        return runner  # type: ignore[no-any-return]
    if getattr(source, "host", None) is None:
        return LocalRunner()
    raise SourceUnavailable(source.label, "this source cannot run commands where its jobs live")


async def program_missing(runner: Runner, program: str, cwd: str | None) -> str | None:
    """Why `program` cannot be started where `runner` runs (None when it can). Reads only."""
    if runner.host is None:
        if "/" in program:
            path = program if os.path.isabs(program) or not cwd else os.path.join(cwd, program)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return None
            return f"{program}: no such executable on this machine"
        if shutil.which(program) is not None:
            return None
        return f"{program}: command not found on this machine (not on PATH)"
    # `command -v` through the host's own shell: the same PATH the command will see
    res = await runner.run(["sh", "-c", 'command -v -- "$0" >/dev/null 2>&1', program], cwd=cwd, timeout_s=60)
    if res.error:
        return f"cannot check {program} on {runner.host}: {res.error}"
    if res.exit_code == 0:
        return None
    if cwd and res.exit_code not in (1, 127):
        return f"cannot enter {cwd} on {runner.host}: {(res.stderr_tail.strip().splitlines() or [''])[-1]}"
    return f"{program}: command not found on {runner.host}"


_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f]")


def printable(text: str) -> str:
    """A command's output as a terminal may show it: escape sequences and control characters
    dropped (a progress bar's carriage returns become line ends), newlines and tabs kept."""
    return _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
