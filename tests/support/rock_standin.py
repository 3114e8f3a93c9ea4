"""The rl-rock CLI, reading a local scenario instead of Alibaba OSS.

Run by the Python of a venv where rl-rock is installed (`EVALDESK_ROCK_VENV`, default
~/.cache/evaldesk/venvs/rock; `.ci/run` creates it):

    <venv>/bin/python rock_standin.py SCENARIO.json job run-status --run-id X --jobs --output json

The first argument is a JSON scenario ``{"runs": [RunMeta fields…], "jobs": {job_name: JobMeta
fields…}}``; the rest is rock's own command line. Every record is validated into rl-rock's
OWN models (rock.sdk.job.meta: RunMeta, RunScoreSummary, JobMeta), and rock's own CLI code
(argument parsing, RunMetaRepository, the JSON printing of `run-list` / `run-status`) runs
unchanged: only the viewer's storage (OSS) is replaced by the scenario. A format change in
rl-rock therefore shows up here, not in production.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main() -> None:
    scenario_path = sys.argv[1]
    with open(scenario_path, encoding="utf-8") as fh:
        scenario: dict[str, Any] = json.load(fh)

    from rock.sdk.job.meta import JobMeta, RunMeta
    from rock.sdk.job.viewer import JobViewer

    runs = [RunMeta.model_validate(r) for r in scenario.get("runs", [])]
    jobs = {name: JobMeta.model_validate(j) for name, j in scenario.get("jobs", {}).items()}

    class ScenarioViewer(JobViewer):
        """JobViewer's run/job reads, from the scenario instead of an OSS bucket."""

        def __init__(self) -> None:  # no bucket
            pass

        def get_run_meta(self, run_id: str) -> RunMeta | None:
            return next((r for r in runs if r.run_id == run_id), None)

        def list_runs(self) -> list[RunMeta]:
            return sorted(runs, key=lambda r: r.run_id)

        def get_job_meta(self, job_name: str) -> JobMeta | None:
            return jobs.get(job_name)

        def get_trial_results(self, job_name: str) -> dict[str, Any]:
            return {}

    # the one place rock's CLI builds its OSS viewer (job.py: JobViewer.from_credentials)
    JobViewer.from_credentials = classmethod(lambda cls, **kw: ScenarioViewer())  # type: ignore[method-assign,assignment]
    sys.argv = ["rock", *sys.argv[2:]]
    from rock.cli.main import main as rock_main

    rock_main()


if __name__ == "__main__":
    main()
