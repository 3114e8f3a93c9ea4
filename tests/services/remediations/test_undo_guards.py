"""Undo never overwrites newer content: it compares what it would restore over with what apply
left, refuses with what changed, and the record stays open for a later undo. Reads on the
write path never hang on a fifo nor read a huge file whole."""

from __future__ import annotations

import json
import os
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from services.core.journal import Journal
from services.remediations.records import RecordIndex
from tests.support.harbor_factory import T0, JobBuilder
from tests.support.writes import full_tree, job_to_dedupe, run_cli, tree_diff
from tui.cli import main


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def applied(capsys: pytest.CaptureFixture[str], d: Path) -> tuple[dict[str, object], str]:
    code, out, err = cli(capsys, "--batch", "dedupe", "--apply", "--format", "json", str(d))
    assert code == 0, err
    [plan] = json.loads(out)["plans"]
    return plan, str(plan["record"])


def undo(capsys: pytest.CaptureFixture[str], spec: str) -> tuple[int, str, str]:
    return cli(capsys, "--batch", "undo", "--format", "json", spec)


def test_undo_refuses_over_an_aggregate_rewritten_after_the_dedupe(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    d = job_to_dedupe(tmp_path)
    before = full_tree(d)
    _, record = applied(capsys, d)
    rebuilt = (d / "result.json").read_bytes()
    newer = rebuilt.replace(b'"n_total_trials": 4', b'"n_total_trials": 5')
    assert newer != rebuilt
    (d / "result.json").write_bytes(newer)
    held = full_tree(d)
    code, out, err = undo(capsys, str(d))
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1
    assert "result.json changed since evaldesk wrote it" in err and "stays open" in err
    assert full_tree(d) == held  # nothing was put back over the newer file
    assert RecordIndex().get(record)["status"] == "applied"  # type: ignore[index]
    # put evaldesk's version back and the same record undoes cleanly
    (d / "result.json").write_bytes(rebuilt)
    code, _, err = undo(capsys, record)
    assert code == 0, err
    assert full_tree(d) == before, tree_diff(before, full_tree(d))


def test_undo_refuses_when_a_trial_was_added_after_the_dedupe(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    d = job_to_dedupe(tmp_path)
    before = full_tree(d)
    applied(capsys, d)
    late = JobBuilder(tmp_path, d.name, dataset="dev_set_v2", n_attempts=2, seed=99, write_result=False,
                      write_config=False)
    t = late.add("task-000", 1.0, started=T0 + timedelta(hours=9))
    late.write_trial(t)
    held = full_tree(d)
    code, _, err = undo(capsys, str(d))
    assert code == 1 and f"1 new entry in {d.name} since the dedupe: {t.name}" in err, err
    assert full_tree(d) == held
    shutil.rmtree(d / str(t.name))
    code, _, err = undo(capsys, str(d))
    assert code == 0, err
    assert full_tree(d) == before


def test_a_staged_copy_added_after_the_dedupe_is_named_too(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    d = job_to_dedupe(tmp_path)
    applied(capsys, d)
    (d / "restored" / "task-009__NEWCOPY").mkdir()
    (d / "restored" / "task-009__NEWCOPY" / "config.json").write_text("{}")
    code, _, err = undo(capsys, str(d))
    assert code == 1 and "1 new entry in restored since the dedupe: task-009__NEWCOPY" in err, err


def test_a_quarantined_path_recreated_in_the_job_is_reported_and_the_record_stays_open(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = job_to_dedupe(tmp_path)
    before = full_tree(d)
    plan, record = applied(capsys, d)
    again = str(plan["remove"][0])  # type: ignore[index]
    (d / again).mkdir()
    (d / again / "note.txt").write_text("made by hand after the dedupe\n")
    held = full_tree(d)
    for _ in range(2):  # a later undo still finds it, and still refuses
        code, _, err = undo(capsys, str(d))
        assert code == 1 and f"{again} was re-created in the job since" in err, err
        assert "move one of them away" in err
        assert full_tree(d) == held
    assert RecordIndex().get(record)["status"] == "applied"  # type: ignore[index]
    shutil.rmtree(d / again)
    code, out, err = undo(capsys, str(d))
    assert code == 0 and json.loads(out)["record"] == record, err
    assert full_tree(d) == before


def test_undo_says_what_is_gone_when_a_quarantined_dir_was_deleted(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    d = job_to_dedupe(tmp_path)
    plan, record = applied(capsys, d)
    gone = str(plan["remove"][0])  # type: ignore[index]
    shutil.rmtree(d / ".evaldesk-quarantine" / record / "trials" / gone)
    held = full_tree(d)
    code, _, err = undo(capsys, str(d))
    assert code == 1 and f"{gone} is gone" in err, err
    assert full_tree(d) == held
    # the original aggregate deleted from the quarantine is named too
    (d / ".evaldesk-quarantine" / record / "files" / "result.json.orig").unlink()
    code, _, err = undo(capsys, str(d))
    assert code == 1 and "the original of result.json is gone" in err


def test_journal_entries_before_the_first_change_and_after_undo(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    d = job_to_dedupe(tmp_path)
    _, record = applied(capsys, d)
    assert undo(capsys, record)[0] == 0
    begin, done, undone = Journal().entries()
    assert begin.action == "dedupe:begin" and begin.detail["status"] == "applying" and begin.detail["done"] == 0
    assert begin.before["attempts"] == 6 and begin.after["attempts"] == 4  # what it is about to do
    assert done.action == "dedupe:apply" and done.detail["done"] == 5
    assert undone.action == "dedupe:undo" and undone.before == done.after and undone.after == done.before


# -- reads on the write path -------------------------------------------------------------------

def test_a_fifo_named_harbor_result_json_hangs_nothing(tmp_path: Path) -> None:
    d = job_to_dedupe(tmp_path)
    (d / "harbor_result.json").unlink()
    os.mkfifo(d / "harbor_result.json")
    before = full_tree(d)
    p = run_cli("--batch", "dedupe", "--apply", "--format", "table", str(d), timeout=60)
    assert p.returncode == 0, p.stderr
    assert "harbor_result.json is not rebuilt" in p.stdout and "not a regular file" in p.stdout
    u = run_cli("--batch", "undo", str(d), timeout=60)
    assert u.returncode == 0, u.stderr
    assert full_tree(d) == before


PEAK = ("import resource, sys; from tui.cli import main; rc = main(sys.argv[1:]); "
        "sys.stderr.write(f'PEAK_RSS_KB={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n'); sys.exit(rc)")


def _peak_kb(stderr: str) -> int:
    return int(next(ln for ln in stderr.splitlines() if ln.startswith("PEAK_RSS_KB=")).split("=")[1])


def test_a_200_mb_aggregate_is_refused_with_a_note_not_read_whole(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.support.writes import ROOT

    def peak(d: Path) -> tuple[int, str]:
        p = subprocess.run([sys.executable, "-c", PEAK, "--batch", "dedupe", "--apply", "--format", "table", str(d)],
                           capture_output=True, text=True, timeout=120, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert p.returncode == 0, p.stderr
        return _peak_kb(p.stderr), p.stdout

    baseline, _ = peak(job_to_dedupe(tmp_path / "small"))
    d = job_to_dedupe(tmp_path / "big")
    with open(d / "harbor_result.json", "r+b") as fh:
        fh.truncate(200 * 1024 * 1024)  # sparse: the size is what matters
    kb, out = peak(d)
    assert "harbor_result.json is not rebuilt" in out and "over the" in out
    # the file is never read whole: peak memory stays where a job without it is
    assert kb < baseline + 40 * 1024, (kb, baseline)
    assert (d / "harbor_result.json").stat().st_size == 200 * 1024 * 1024


def test_a_trial_dir_whose_name_is_not_utf8_is_moved_journaled_and_put_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = job_to_dedupe(tmp_path)
    code, out, _ = cli(capsys, "--batch", "dedupe", "--format", "json", str(d))
    surplus = json.loads(out)["plans"][0]["remove"][0]
    odd = os.fsencode(str(d)) + b"/task-000__\xff\xfe\x1b[31m"
    os.rename(os.fsencode(str(d / surplus)), odd)
    before = full_tree(d)
    _, record = applied(capsys, d)
    assert not os.path.lexists(odd)
    [done] = [e for e in Journal().entries() if e.action == "dedupe:apply"]
    assert "task-000__\udcff\udcfe\x1b[31m" in done.before["trial_dirs"]  # the exact name, in the journal
    code, _, err = undo(capsys, record)
    assert code == 0, err
    assert os.path.isdir(odd)
    assert full_tree(d) == before
