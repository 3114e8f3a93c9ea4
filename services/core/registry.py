"""Where sources come from: one registry of backends, keyed by URL scheme and config section.

The console and the batch commands never import a backend by name; they hand a SOURCE (a
path or a URL) or the config to this module. A backend is a folder under `services/` with a
`backend.py` module that provides what `Backend` lists; adding one is that folder plus one
line in `BACKENDS`. Every backend is asked of every local folder: its `backend.py` looks with a
few stats and imports its models and sources only once it opens one.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Protocol, cast

from services.core.config import Config
from services.core.models import AuditReport, Experiment
from services.core.policy import Policy
from services.core.source import Source, SourceUnavailable

# (name, module). The first is the embedded default: it opens any local path nothing else claims.
BACKENDS: tuple[tuple[str, str], ...] = (
    ("harbor", "services.harbor.backend"),
    ("csbench", "services.csbench.backend"),
    ("aisbench", "services.aisbench.backend"),
    ("rock", "services.rock.backend"),
    ("objectstore", "services.objectstore.backend"),
)


class Backend(Protocol):
    """What a backend module provides (a module satisfies a Protocol by its names)."""

    NAME: str
    SCHEMES: tuple[str, ...]
    KINDS: tuple[str, ...]  # the `Experiment.source` values its sources yield

    def open_url(self, spec: str, config: Config) -> Source:
        """A source for `scheme://…`; raises ValueError for a malformed URL."""
        ...

    def open_path(self, path: str, config: Config) -> Source:
        """A source over a local path, whether or not it holds anything yet."""
        ...

    def find_local(self, path: str, config: Config) -> list[Source]:
        """The sources this backend sees in a local folder (the folder itself or children)."""
        ...

    def claims(self, path: str) -> bool:
        """`path` itself is one experiment of this backend, so no other backend looks inside it
        (a Harbor job dir's 100k children are trials: nobody else's roots)."""
        ...

    def configured(self, config: Config) -> list[Source]:
        """The sources its own config section describes."""
        ...

    def write_demo(self, root: Path, now: datetime) -> list[Path]:
        """Write this backend's demo data under `root`; the paths written."""
        ...

    def audit(self, exp: Experiment, policy: Policy, now: datetime) -> AuditReport | None:
        """Its own checklist for `exp`, or None for the Harbor-style checks of DESIGN 3."""
        ...


@cache
def _load(module: str) -> Backend:
    return cast(Backend, importlib.import_module(module))


def each_backend() -> Iterator[Backend]:
    """The backends in order, each imported only when reached: a command about one Harbor job
    stops at the first and never pays for the others' imports (their models, SSH)."""
    for _, module in BACKENDS:
        yield _load(module)


def backends() -> tuple[Backend, ...]:
    return tuple(each_backend())


def backend(name: str) -> Backend:
    for b in each_backend():
        if name == b.NAME:
            return b
    raise KeyError(f"no backend {name!r}")


def backend_audit(exp: Experiment, policy: Policy, now: datetime) -> AuditReport | None:
    """The checklist of the backend that yielded `exp`, when it has its own."""
    for b in each_backend():
        if exp.source in b.KINDS:
            return b.audit(exp, policy, now)
    return None


def scheme_of(spec: str) -> str | None:
    head, sep, _ = spec.partition("://")
    return head.lower() if sep and head and "/" not in head else None


def open_sources(spec: str, config: Config) -> list[Source]:
    """Every source a command-line SOURCE names: a URL opens one; a local folder may hold
    several kinds (Harbor job dirs beside csbench results …), one source per kind.

    Raises SourceUnavailable for a missing path or an unknown scheme, ValueError for a
    malformed URL.
    """
    scheme = scheme_of(spec)
    if scheme is not None and scheme != "file":
        for b in each_backend():
            if scheme in b.SCHEMES:
                return [b.open_url(spec, config)]
        known = sorted({s for b in backends() for s in b.SCHEMES})
        raise SourceUnavailable(spec, f"unknown scheme {scheme}:// (evaldesk reads {', '.join(known)} and paths)")
    path = spec[len("file://"):] if scheme == "file" else spec
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(path):
        raise SourceUnavailable(spec, "no such file or directory")
    found: list[Source] = []
    try:
        owner = next((b for b in each_backend() if b.claims(path)), None)
    except PermissionError as exc:
        raise SourceUnavailable(spec, f"permission denied: {exc.filename or path}") from None
    for b in backends() if owner is None else (owner,):
        try:
            found += b.find_local(path, config)
        except PermissionError as exc:
            raise SourceUnavailable(spec, f"permission denied: {exc.filename or path}") from None
    # nothing recognised: the default backend opens it anyway and says what it did not find
    return found or [next(each_backend()).open_path(path, config)]


def open_source(spec: str, config: Config) -> Source:
    """The one source a SOURCE names (the first, when a folder holds several kinds)."""
    return open_sources(spec, config)[0]


def _label(sources: list[Source], base: str) -> None:
    """People read labels in the header and the row keys: a folder's name, the kind beside it
    when one folder holds several kinds."""
    for i, src in enumerate(sources):
        src.label = base if i == 0 else f"{base}/{src.kind}"


def _unique_labels(sources: list[Source]) -> None:
    seen: dict[str, int] = {}
    for src in sources:
        base = src.label
        if base in seen:
            seen[base] += 1
            src.label = f"{base}#{seen[base]}"
        else:
            seen[base] = 1


def open_all(specs: list[str], config: Config) -> tuple[list[Source], list[str]]:
    """Sources from command-line SOURCEs, else from the config (`[[sources]]` entries, then
    each backend's own sections). A bad entry does not stop the others: its error comes back
    as one line naming it."""
    sources: list[Source] = []
    errors: list[str] = []
    wanted: list[tuple[str, str | None]] = [(s, None) for s in specs]
    if not specs:
        wanted = [(s.path, s.name) for s in config.sources]
    for spec, name in wanted:
        try:
            opened = open_sources(spec, config)
        except Exception as exc:
            errors.append(f"{spec}: {getattr(exc, 'message', None) or exc}")
            continue
        if name:
            _label(opened, name)
        elif scheme_of(spec) is None:
            _label(opened, Path(spec).expanduser().resolve().name or spec)
        sources += opened
    if not specs:
        for b in backends():
            try:
                sources += b.configured(config)
            except Exception as exc:
                errors.append(f"{b.NAME}: {getattr(exc, 'message', None) or exc}")
    _unique_labels(sources)
    return sources, errors


def write_demo(root: Path, now: datetime) -> list[Path]:
    """Every backend's demo data, side by side in one folder that `open_sources` reads whole."""
    written: list[Path] = []
    for b in backends():
        written += b.write_demo(root, now)
    return written


def demo_sources(config: Config, root: Path, label: str = "demo") -> list[Source]:
    """The demo data's sources (the data must exist: see `write_demo`)."""
    opened = open_sources(str(root), config)
    _label(opened, label)
    return opened
