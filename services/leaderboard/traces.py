"""Trace datasets on the Hugging Face Hub (or any HF_ENDPOINT), through `huggingface_hub.HfApi`.

Reads: does a dataset exist, and how many files does it hold. Writes: create the dataset and
commit one file. The dataset of a run is the last episode of each trial — the scored one —
written one trial at a time to a JSONL file, so no more than one episode is ever in memory.
The token is read from the env var `[traces] token_env` names and never shown.
"""

from __future__ import annotations

import asyncio
import json
import os
import posixpath
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

from services.core.config import Config, TracesConfig
from services.core.models import Experiment, TrialStatus
from services.leaderboard.client import redact, remember_secret
from services.leaderboard.rows import TraceStatus
from services.transport.fs import JobFS

T = TypeVar("T")
DEFAULT_ENDPOINT = "https://huggingface.co"
DATA_FILE = "data/traces.jsonl"
EPISODE = re.compile(r"^episode-(\d+)$")
# one file of an episode read whole at most; bigger ones are cut and say so
MAX_EPISODE_FILE = 8 * 1024 * 1024
EPISODE_FILES = ("prompt.txt", "response.txt", "debug.json")


class TracesError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


def endpoint_of(settings: TracesConfig, environ: dict[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return (settings.endpoint or env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def expected_repo(exp: Experiment, config: Config) -> str | None:
    """The dataset id this run's traces go to (`[traces] repo_template`), None without an org."""
    org = config.traces.org
    if not org:
        return None
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", exp.id).strip("-.")[:90]
    return config.traces.repo_template.format(org=org, job=name)


class HubClient:
    def __init__(self, settings: TracesConfig, token: str | None, environ: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.endpoint = endpoint_of(settings, environ)
        self.timeout_s = settings.timeout_s
        if token:
            remember_secret(token)
        self._token = token
        from huggingface_hub import HfApi
        from huggingface_hub.utils import logging as hf_logging

        hf_logging.set_verbosity_error()  # its retry chatter would reach the console's terminal
        self._api = HfApi(endpoint=self.endpoint, token=token or False)

    @classmethod
    def from_config(cls, config: Config, environ: dict[str, str] | None = None) -> HubClient:
        env = dict(os.environ) if environ is None else environ
        return cls(config.traces, env.get(config.traces.token_env) or None, env)

    @property
    def can_write(self) -> bool:
        return bool(self._token)

    def url(self, repo_id: str) -> str:
        return f"{self.endpoint}/datasets/{repo_id}"

    async def _call(self, what: str, fn: Callable[[], T]) -> T:
        def run() -> T:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return fn()

        try:
            return await asyncio.wait_for(asyncio.to_thread(run), self.timeout_s)
        except TimeoutError:
            raise TracesError(f"{what}: no answer within {self.timeout_s:g} s") from None
        except TracesError:
            raise
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise TracesError(f"{what}: {type(exc).__name__}: {first}") from None

    async def status(self, repo_id: str) -> TraceStatus:
        def run() -> TraceStatus:
            files = self._siblings(repo_id)
            if files is None:
                return TraceStatus(repo_id=repo_id, exists=False, n_files=0)
            data = [f for f in files if not f.startswith(".") and f not in ("README.md",)]
            return TraceStatus(repo_id=repo_id, exists=True, n_files=len(data))

        try:
            return await self._call(f"reading dataset {repo_id}", run)
        except TracesError as exc:
            return TraceStatus(repo_id=repo_id, error=str(exc))

    def _siblings(self, repo_id: str) -> list[str] | None:
        # dataset_info is one request (list_repo_files retries for ~20 s on a refused connection)
        from huggingface_hub.errors import RepositoryNotFoundError

        try:
            info = self._api.dataset_info(repo_id, timeout=self.timeout_s)
        except RepositoryNotFoundError:
            return None
        return [s.rfilename for s in (info.siblings or [])]

    async def files(self, repo_id: str) -> list[str] | None:
        """The dataset's files, None when it does not exist."""
        return await self._call(f"reading dataset {repo_id}", lambda: self._siblings(repo_id))

    async def upload(self, repo_id: str, local: Path, path_in_repo: str, message: str) -> str:
        """Create the dataset if needed and commit one file; returns the commit id."""
        if not self._token:
            raise TracesError(f"uploading to {repo_id} needs a token: export {self.settings.token_env}=…")

        def run() -> str:
            self._api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
            info = self._api.upload_file(path_or_fileobj=str(local), path_in_repo=path_in_repo, repo_id=repo_id,
                                         repo_type="dataset", commit_message=message)
            return str(getattr(info, "oid", "") or "")

        return await self._call(f"uploading to dataset {repo_id}", run)


async def _last_episode(fs: JobFS, trial_dir: str) -> tuple[str | None, dict[str, str]]:
    """The highest-numbered `agent/episode-N` of a trial (Harbor's terminus agents), else its
    ATIF `agent/trajectory.json`; the files read are bounded."""
    agent = posixpath.join(trial_dir, "agent")
    try:
        names = await fs.list_dir(agent)
    except OSError:
        return None, {}
    numbered = [(int(m.group(1)), n) for n in names if (m := EPISODE.match(n))]
    files: dict[str, str] = {}
    if numbered:
        _, last = max(numbered)
        for f in EPISODE_FILES:
            data = await _read(fs, posixpath.join(agent, last, f))
            if data is not None:
                files[f] = data
        return last, files
    data = await _read(fs, posixpath.join(agent, "trajectory.json"))
    if data is not None:
        return "trajectory", {"trajectory.json": data}
    return None, {}


async def _read(fs: JobFS, path: str) -> str | None:
    from services.transport.fs import TooLarge

    try:
        raw = await fs.read_regular(path, MAX_EPISODE_FILE)
    except TooLarge:
        return f"[{posixpath.basename(path)} is larger than {MAX_EPISODE_FILE} bytes: not included]"
    except OSError:
        return None
    return raw.decode("utf-8", "replace")


async def write_last_episodes(fs: JobFS, exp: Experiment, out: IO[str],
                              progress: Callable[[int, int], None] | None = None) -> int:
    """One JSON line per finished trial (staged copies skipped): its task, reward, exception
    and last episode. Streamed: each line is written before the next trial is read."""
    trials = [t for t in exp.trials if t.copy_of is None and t.status != TrialStatus.running]
    n = 0
    for i, t in enumerate(sorted(trials, key=lambda t: t.path)):
        episode, files = await _last_episode(fs, posixpath.join(exp.path, t.path))
        line: dict[str, Any] = {
            "run": exp.id, "trial_name": t.trial_name, "task_name": t.task_name, "reward": t.reward,
            "status": t.status.value, "exception_type": t.exception_type, "episode": episode, "files": files,
        }
        out.write(json.dumps(line, ensure_ascii=False) + "\n")
        n += 1
        if progress and (i % 50 == 0 or i == len(trials) - 1):
            progress(i + 1, len(trials))
    out.flush()
    return n
