"""The source registry: which backends read a local path."""

from __future__ import annotations

import json
from pathlib import Path

from services.core.config import Config
from services.core.registry import open_sources
from tests.support.harbor_factory import healthy_job


def test_a_harbor_job_dir_is_read_by_harbor_alone(tmp_path: Path) -> None:
    job = healthy_job(tmp_path, n_tasks=3, n_rep=1).write()
    # a trial dir that happens to hold what another backend looks for (Rock's results/*.json)
    trial = next(p for p in job.iterdir() if p.is_dir())
    (trial / "results").mkdir()
    (trial / "results" / "exp.json").write_text(json.dumps({"experiment_id": "exp"}))
    assert [s.kind for s in open_sources(str(job), Config())] == ["harbor"]
    # the folder holding the job is a jobs folder: every backend looks at its children
    (tmp_path / "rock-work" / "results").mkdir(parents=True)
    (tmp_path / "rock-work" / "results" / "exp.json").write_text(json.dumps({"experiment_id": "exp"}))
    assert sorted(s.kind for s in open_sources(str(tmp_path), Config())) == ["harbor", "rock"]
