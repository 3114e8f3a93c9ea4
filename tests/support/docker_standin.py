"""A stand-in `docker` for the eval host of the tests (no Docker engine here).

It keeps its containers as files under `$DOCKER_STANDIN_STATE/containers/<name>` ("true" while
running) and answers the commands evaldesk and the runbook's scripts give the host's docker, in
docker's own words:

    docker image inspect --format {{.Id}} IMAGE      images listed in $DOCKER_STANDIN_STATE/images
    docker inspect --format {{.State.Running}} NAME  "true"/"false"; "Error: No such object: NAME", exit 1
    docker run -d --name NAME … IMAGE sleep infinity  a running container
    docker start|stop NAME, docker rm -f NAME
    docker exec [-d] NAME CMD…                       CMD on this machine (a container shares the host's
                                                     pid view here; with -d, a shim waits for CMD);
                                                     "container NAME is not running", exit 1

Every call is appended to `$DOCKER_STANDIN_STATE/calls.log`.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
import uuid
from pathlib import Path


def state() -> Path:
    return Path(os.environ["DOCKER_STANDIN_STATE"])


def container(name: str) -> Path:
    return state() / "containers" / name


def _format(args: list[str]) -> tuple[str | None, list[str]]:
    fmt, rest, i = None, [], 0
    while i < len(args):
        if args[i] in ("-f", "--format"):
            fmt = args[i + 1]
            i += 2
            continue
        if args[i].startswith("--format="):
            fmt = args[i].split("=", 1)[1]
        else:
            rest.append(args[i])
        i += 1
    return fmt, rest


def _detach(run: list[str]) -> int:
    """`docker exec -d`: CMD outlives this call, and — as under docker's shim, which waits for
    what it started — a CMD that dies is reaped at once, so `kill -0` of its pid fails then."""
    if os.fork():
        return 0
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the caller's pipes close when `docker exec -d` returns, as docker's do
        os.dup2(null, fd)
    child = subprocess.Popen(run, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    child.wait()
    os._exit(0)


def main(argv: list[str]) -> int:
    (state() / "containers").mkdir(parents=True, exist_ok=True)
    with (state() / "calls.log").open("a") as fh:
        fh.write(" ".join(argv) + "\n")
    if argv[:2] == ["image", "inspect"]:
        _, rest = _format(argv[2:])
        images = (state() / "images").read_text().split() if (state() / "images").exists() else []
        if rest and rest[-1] in images:
            print(f"sha256:{uuid.uuid5(uuid.NAMESPACE_DNS, rest[-1]).hex}")
            return 0
        print(f"Error response from daemon: No such image: {rest[-1] if rest else ''}", file=sys.stderr)
        return 1
    cmd, args = (argv[0], argv[1:]) if argv else ("", [])
    if cmd == "inspect":
        fmt, rest = _format(args)
        name = rest[-1] if rest else ""
        c = container(name)
        if not c.exists():
            print(f"Error: No such object: {name}", file=sys.stderr)
            return 1
        running = c.read_text().strip()
        print(running if fmt == "{{.State.Running}}" else f'[{{"Name": "/{name}", "State": {{"Running": {running}}}}}]')
        return 0
    if cmd == "run":
        name = args[args.index("--name") + 1]
        if container(name).exists():
            print(f'docker: Error response from daemon: Conflict. The container name "/{name}" is already in use.',
                  file=sys.stderr)
            return 125
        container(name).write_text("true")
        print(uuid.uuid4().hex * 2)
        return 0
    if cmd in ("start", "stop", "rm"):
        names = [a for a in args if not a.startswith("-")]
        for name in names:
            c = container(name)
            if not c.exists():
                if cmd == "rm" and "-f" in args:
                    continue
                print(f"Error response from daemon: No such container: {name}", file=sys.stderr)
                return 1
            if cmd == "rm":
                c.unlink()
            else:
                c.write_text("true" if cmd == "start" else "false")
            print(name)
        return 0
    if cmd == "exec":
        detach = args[:1] == ["-d"]
        rest = args[1:] if detach else args
        name, run = rest[0], rest[1:]
        c = container(name)
        if not c.exists() or c.read_text().strip() != "true":
            print(f"Error response from daemon: container {name} is not running" if c.exists() else
                  f"Error response from daemon: No such container: {name}", file=sys.stderr)
            return 1
        if detach:
            return _detach(run)
        return subprocess.run(run, check=False).returncode
    print(f"docker stand-in: {' '.join(argv)}: not a command it knows", file=sys.stderr)
    return 2


def install(bin_dir: Path, state_dir: Path, images: list[str]) -> Path:
    """An executable `docker` in `bin_dir` keeping its state in `state_dir`, with `images` pulled."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "images").write_text("\n".join(images) + "\n")
    exe = bin_dir / "docker"
    exe.write_text(f"#!/bin/sh\nDOCKER_STANDIN_STATE={shlex.quote(str(state_dir))} exec {sys.executable} "
                   f"{shlex.quote(str(Path(__file__).resolve()))} "
                   '"$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return exe


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
