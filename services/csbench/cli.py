"""The `csbench` commands evaldesk runs, as argv through the shared runner (never a shell).

`status` and `logs` are reads (run by the campaign source on every scan); `fetch` and
`teardown` change things and run only as `command` steps of the write path
(services.csbench.teardown / fetch). Paths in `[csbench]` are resolved once here: relative
ones against the evaldesk config file's dir.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from services.core.config import Config, CsbenchConfig
from services.core.xdg import data_dir
from services.csbench.formats import DEFAULT_WATCHDOG_TIMEOUT_S, OutputError, StatusLine, parse_status
from services.transport.process import CommandNotFound, LocalRunner, Runner

MAX_OUTPUT_CHARS = 4 * 1024 * 1024


class CLIError(Exception):
    """A csbench command that could not run or did not succeed; one line, for people."""


@dataclass(frozen=True)
class Settings:
    config: str  # absolute path of csbench's YAML
    results_dir: str
    workdir: str
    executable: str
    campaigns: tuple[str, ...]
    expect_real: bool
    timeout_s: float
    plans: tuple[str, ...] = ()  # absolute paths of submit plans
    watchdog_timeout_s: float = DEFAULT_WATCHDOG_TIMEOUT_S

    def campaign_dir(self, cid: str) -> str:
        return os.path.join(self.results_dir, cid)

    def argv(self, command: str, cid: str, *extra: str) -> list[str]:
        return [self.executable, command, cid, "--config", self.config, *extra]

    def submit_argv(self, plan: str) -> list[str]:
        """The runbook's submit command; the watchdog is always said, never left to a default."""
        return [self.executable, "submit", plan, "--config", self.config,
                "--watchdog-timeout", f"{self.watchdog_timeout_s:g}"]


def _abs(path: str, base: str) -> str:
    p = os.path.expanduser(path)
    return os.path.normpath(p if os.path.isabs(p) else os.path.join(base, p))


def settings(config: Config) -> Settings | None:
    cfg: CsbenchConfig | None = config.csbench
    if cfg is None:
        return None
    base = os.path.dirname(config.config_path) if config.config_path else os.getcwd()
    yaml_path = _abs(cfg.config, base)
    if cfg.workdir:
        workdir = _abs(cfg.workdir, base)
    else:
        # the runbook keeps the config under <checkout>/configs/ and runs from the checkout
        here = os.path.dirname(yaml_path)
        workdir = os.path.dirname(here) if os.path.basename(here) == "configs" else here
    executable = cfg.executable
    if os.sep in executable:
        executable = _abs(executable, base)
    results = _abs(cfg.results_dir, base) if cfg.results_dir else str(Path(data_dir()) / "csbench")
    return Settings(config=yaml_path, results_dir=results, workdir=workdir, executable=executable,
                    campaigns=tuple(dict.fromkeys(cfg.campaigns)), expect_real=cfg.expect_real,
                    timeout_s=cfg.timeout_s, plans=tuple(dict.fromkeys(_abs(p, base) for p in cfg.plans)),
                    watchdog_timeout_s=cfg.watchdog_timeout_s)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


class CsbenchCLI:
    """Read-only csbench commands for one `[csbench]` config."""

    def __init__(self, s: Settings, runner: Runner | None = None) -> None:
        self.s = s
        self.runner: Runner = runner or LocalRunner()

    async def _run(self, argv: list[str]) -> str:
        cwd = self.s.workdir if os.path.isdir(self.s.workdir) else None
        # the runner keeps only a tail; a controller log is read whole (bounded)
        chunks: list[str] = []
        size = 0

        def collect(stream: str, text: str) -> None:
            nonlocal size
            if stream == "stdout" and size < MAX_OUTPUT_CHARS:
                chunks.append(text)
                size += len(text)

        try:
            res = await self.runner.run(argv, cwd=cwd, timeout_s=self.s.timeout_s, on_output=collect)
        except CommandNotFound as exc:
            raise CLIError(f"{exc} (set [csbench] executable)") from None
        except TimeoutError:
            raise CLIError(f"`{' '.join(argv[:3])}` did not answer within {self.s.timeout_s:.0f} s") from None
        except OSError as exc:
            raise CLIError(f"`{' '.join(argv[:3])}` could not start: {exc}") from None
        if res.error:
            raise CLIError(f"`{' '.join(argv[:3])}`: {res.error}")
        if res.exit_code != 0:
            why = _last_line(res.stderr_tail) or _last_line(res.stdout_tail) or "no output"
            raise CLIError(f"`{' '.join(argv[:3])}` exited {res.exit_code}: {why}")
        return "".join(chunks)[:MAX_OUTPUT_CHARS]

    async def status(self, cid: str) -> StatusLine:
        out = await self._run(self.s.argv("status", cid))
        try:
            return parse_status(out)
        except OutputError as exc:
            raise CLIError(str(exc)) from None

    async def logs(self, cid: str) -> list[str]:
        # `csbench logs` prints one OSS object per line; an unknown id prints nothing
        out = await self._run(self.s.argv("logs", cid))
        return out.splitlines()
