"""SLURM scheduler state for eval runs.

Which SLURM job an eval belongs to, in this order:

1. the job config key named by `HostConfig.slurm_job_id_key` (default `slurm_job_id`) in the
   job dir's `config.json` — `assemble_experiment` already fills `Experiment.scheduler_job_id`
   from `slurm_job_id` there, or from `SLURM_JOB_ID=` in `meta.env`; a non-default key is read
   here from the same config bytes;
2. a configured mapping {job dir name or path: SLURM job id} (`slurm_job_ids` on the host).

All ids of one host are asked about in ONE remote command: `sacct -j IDS -X -o
JobID,State,ExitCode,Elapsed -P -n`, then `squeue` and `scontrol show job` for ids that sacct
has no record of yet, or only a lagging one (a start or an end reaches slurmdbd
asynchronously). Terminal states are cached, so a finished eval is never asked about again;
one that ends while it is followed is said finished from the refresh after (SlurmTracker says
why).

SLURM's word goes to `Experiment.scheduler_state` (first word only: `CANCELLED by 0` becomes
`CANCELLED`) and is mapped onto `Experiment.state`; `state_raw` keeps the source's own word.
The audit's `finished` check reads `scheduler_state`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import orjson

from services.core.models import Experiment, State
from services.core.source import SourceUnavailable

RunFn = Callable[[str], Awaitable[tuple[int | None, bytes, bytes]]]

_JOB_ID = re.compile(r"^\d+(?:_\d+)?(?:\+\d+)?$")

_STATE_MAP: dict[str, State] = {
    "PENDING": State.pending,
    "REQUEUED": State.pending,
    "REQUEUE_HOLD": State.pending,
    "REQUEUE_FED": State.pending,
    "RESV_DEL_HOLD": State.pending,
    "CONFIGURING": State.pending,
    "SUSPENDED": State.pending,
    "RUNNING": State.running,
    "COMPLETING": State.running,
    "STAGE_OUT": State.running,
    "SIGNALING": State.running,
    "RESIZING": State.running,
    "COMPLETED": State.finished,
    "FAILED": State.failed,
    "TIMEOUT": State.failed,
    "NODE_FAIL": State.failed,
    "OUT_OF_MEMORY": State.failed,
    "BOOT_FAIL": State.failed,
    "DEADLINE": State.failed,
    "CANCELLED": State.cancelled,
    "PREEMPTED": State.cancelled,
    "REVOKED": State.cancelled,
}
TERMINAL = {k for k, v in _STATE_MAP.items() if v in (State.finished, State.failed, State.cancelled)}


@dataclass(kw_only=True)
class SlurmJobState:
    job_id: str
    state: str  # first word, e.g. CANCELLED
    raw: str  # as printed, e.g. "CANCELLED by 0"
    exit_code: str | None = None
    elapsed: str | None = None
    via: str = "sacct"

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL


class SlurmToolsMissing(Exception):
    """None of sacct, squeue, scontrol exists where the eval runs."""


def valid_job_id(job_id: str) -> bool:
    return bool(_JOB_ID.match(job_id))


def map_state(state: str) -> State | None:
    return _STATE_MAP.get(state.split()[0].rstrip("+").upper()) if state.strip() else None


def query_command(ids: list[str]) -> str:
    """A POSIX sh command that prints sacct, then squeue, then scontrol sections."""
    joined = shlex.quote(",".join(ids))
    each = " ".join(shlex.quote(i) for i in ids)
    return (
        "found=0; "
        f"if command -v sacct >/dev/null 2>&1; then found=1; echo '@@sacct'; "
        f"sacct -j {joined} -X -o JobID,State,ExitCode,Elapsed -P -n 2>/dev/null; fi; "
        f"if command -v squeue >/dev/null 2>&1; then found=1; echo '@@squeue'; "
        f"squeue -h -j {joined} -o '%i|%T|%M' 2>/dev/null; fi; "
        f"if command -v scontrol >/dev/null 2>&1; then found=1; echo '@@scontrol'; "
        f"for j in {each}; do scontrol -o show job \"$j\" 2>/dev/null; done; fi; "
        'echo "@@found=$found"'
    )


def parse_query_output(text: str) -> dict[str, SlurmJobState]:
    """Each job's state: sacct's when it is terminal (sacct is the record that survives the
    controller forgetting the job); else the controller's live word, squeue's then scontrol's,
    since a job's start and end reach slurmdbd asynchronously and sacct can lag behind; else
    sacct's."""
    section = ""
    said: dict[str, dict[str, SlurmJobState]] = {"sacct": {}, "squeue": {}, "scontrol": {}}
    found_tools = True
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("@@"):
            if line.startswith("@@found="):
                found_tools = line != "@@found=0"
            section = line[2:]
            continue
        if not line:
            continue
        got: SlurmJobState | None = None
        if section == "sacct":
            parts = line.split("|")
            if len(parts) >= 2 and parts[1]:
                got = SlurmJobState(job_id=parts[0], state=parts[1].split()[0], raw=parts[1],
                                    exit_code=parts[2] if len(parts) > 2 else None,
                                    elapsed=parts[3] if len(parts) > 3 else None, via="sacct")
        elif section == "squeue":
            parts = line.split("|")
            if len(parts) >= 2 and parts[1]:
                got = SlurmJobState(job_id=parts[0], state=parts[1].split()[0], raw=parts[1],
                                    elapsed=parts[2] if len(parts) > 2 else None, via="squeue")
        elif section == "scontrol":
            fields = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
            sc_id, sc_state = fields.get("JobId"), fields.get("JobState")
            if sc_id and sc_state:
                got = SlurmJobState(job_id=sc_id, state=sc_state, raw=sc_state, exit_code=fields.get("ExitCode"),
                                    elapsed=fields.get("RunTime"), via="scontrol")
        if got is not None:
            said[section].setdefault(got.job_id, got)
    if not found_tools:
        raise SlurmToolsMissing("no sacct, squeue or scontrol")
    out = said["sacct"]
    for jid, live in {**said["scontrol"], **said["squeue"]}.items():
        record = out.get(jid)
        if record is None or not record.terminal:
            out[jid] = live
    return out


def job_id_for(exp: Experiment, config_bytes: bytes | None = None, key: str = "slurm_job_id",
               mapping: dict[str, str] | None = None) -> str | None:
    """The SLURM job id of an eval (see the module docstring for the order)."""
    if key != "slurm_job_id" and config_bytes:
        try:
            cfg = orjson.loads(config_bytes)
        except orjson.JSONDecodeError:
            cfg = None
        if isinstance(cfg, dict) and cfg.get(key) not in (None, ""):
            return str(cfg[key])
    if exp.scheduler_job_id:
        return exp.scheduler_job_id
    if mapping:
        return mapping.get(exp.id) or mapping.get(exp.path)
    return None


def apply_state(exp: Experiment, js: SlurmJobState) -> None:
    exp.scheduler_job_id = js.job_id
    exp.scheduler_state = js.state
    mapped = map_state(js.state)
    if mapped is not None:
        exp.state = mapped


class SlurmTracker:
    """Asks about many ids in one command and remembers terminal states.

    Its caller reads the job's files first and asks SLURM second, so a job that ends between the
    two would be reported finished beside files that miss its last trials (an audit could say
    `finalize` one refresh early). A job this tracker saw unfinished is therefore reported as it
    was for the refresh in which it ends, and finished from the next one on, whose files were
    read after SLURM said so. A job first seen finished is reported finished at once: it ended
    before anything was read, nearly always long before.
    """

    def __init__(self) -> None:
        self.final: dict[str, SlurmJobState] = {}
        self.unfinished: dict[str, SlurmJobState] = {}  # the last word on each job still going
        self.queries = 0

    async def states(self, run: RunFn, ids: Iterable[str]) -> dict[str, SlurmJobState]:
        wanted = sorted({i for i in ids if valid_job_id(i)})
        out = {i: self.final[i] for i in wanted if i in self.final}
        ask = [i for i in wanted if i not in self.final]
        if ask:
            self.queries += 1
            _, stdout, _ = await run(query_command(ask))
            found = parse_query_output(stdout.decode("utf-8", "replace"))
            for jid in ask:
                js = found.get(jid)
                if js is None:
                    continue
                out[jid] = js
                if js.terminal:
                    self.final[jid] = js
                    before = self.unfinished.pop(jid, None)
                    if before is not None:
                        out[jid] = before  # ended after this refresh's files were read
                else:
                    self.unfinished[jid] = js
        return out


    async def apply(self, run: RunFn, experiments: list[Experiment], config_of: Callable[[str], bytes | None],
                    followed: dict[str, str], key: str = "slurm_job_id",
                    mapping: dict[str, str] | None = None) -> list[str]:
        """Put each eval's SLURM state on it (one command for them all); what could not be
        asked, in a sentence each. `followed`: job dir → the newest job evaldesk submitted for it."""
        ids: dict[str, list[Experiment]] = {}
        for exp in experiments:
            jid = followed.get(exp.path) or job_id_for(exp, config_of(exp.path), key, mapping)
            if jid:
                exp.scheduler_job_id = jid
                ids.setdefault(jid, []).append(exp)
        if not ids:
            return []
        try:
            states = await self.states(run, ids)
        except SlurmToolsMissing:
            return ["SLURM job ids found but no sacct/squeue/scontrol on the host"]
        except SourceUnavailable as exc:
            return [f"SLURM state: {exc.message}"]
        for jid, exps in ids.items():
            js = states.get(jid)
            if js is not None:
                for exp in exps:
                    apply_state(exp, js)
        return []


async def run_local(command: str) -> tuple[int | None, bytes, bytes]:
    import asyncio

    proc = await asyncio.create_subprocess_shell(
        command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    return proc.returncode, out, err
