"""The write path as an unprivileged user (`nobody`, a real process): a rename the kernel
refuses stops the plan, what was done is put back, and the error names the path — never a
copy; a job dir nobody may write is refused before anything changes; unreadable files in the
quarantine are named, not tripped over. A rename across filesystems fails the same way."""

from __future__ import annotations

import json
import os
from pathlib import Path

from services.core.journal import Journal
from tests.support.as_nobody import Nobody
from tests.support.as_nobody import nobody as nobody
from tests.support.writes import full_tree, job_to_dedupe, tree_diff


def moves_of(d: Path) -> list[str]:
    import asyncio

    from services.core.config import Config
    from services.harbor.source import HarborSource
    from services.remediations import registry

    async def plan() -> list[str]:
        src = HarborSource(d)
        exp = (await src.scan()).experiments[0]
        p = await registry.plan("dedupe", exp, src, Config())
        return [s.label for s in p.steps if s.kind == "move"]

    return asyncio.run(plan())


def test_a_root_owned_surplus_dir_stops_the_plan_and_everything_is_put_back(nobody: Nobody) -> None:
    d = job_to_dedupe(nobody.work)
    nobody.give(d)
    second = moves_of(d)[1]
    os.chown(d / second, 0, 0)  # nobody may not rename a dir it cannot write (its `..` changes)
    before = full_tree(d)
    p = nobody.run("--batch", "dedupe", "--apply", "--format", "json", str(d))
    assert p.returncode == 1, p.stderr
    assert p.stdout == "" and "Traceback" not in p.stderr
    [line] = p.stderr.strip().splitlines()
    assert f"step 2 of 5 (move {second}) failed: Permission denied: {d / second} -> " in line
    assert "everything done before it was put back" in line
    # nothing lost, nothing copied: the tree is exactly as it was (quarantine and lock gone too)
    assert full_tree(d) == before, tree_diff(before, full_tree(d))
    journal = Journal(nobody.home / "state" / "evaldesk" / "journal.jsonl").entries()
    assert [e.action for e in journal] == ["dedupe:begin", "dedupe:apply-failed"]
    assert journal[-1].detail["status"] == "rolled_back" and second in journal[-1].detail["error"]
    # once the dir is nobody's, the same dedupe goes through
    os.chown(d / second, nobody.uid, nobody.gid)
    p = nobody.run("--batch", "dedupe", "--apply", "--format", "json", str(d))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["plans"][0]["applied"] is True


def test_a_job_dir_nobody_may_write_is_refused_before_anything_changes(nobody: Nobody) -> None:
    d = job_to_dedupe(nobody.work)  # root's, mode 0755
    (d / "result.json").chmod(0o644)  # readable to all: only writing is denied
    before = full_tree(d)
    p = nobody.run("--batch", "dedupe", "--apply", str(d))
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == (f"evaldesk: cannot lock {d}: Permission denied: {d / '.evaldesk-lock'}; "
                                "nothing was changed")
    assert full_tree(d) == before
    # the dry run still works: reading needs no write access
    p = nobody.run("--batch", "dedupe", "--format", "json", str(d))
    assert p.returncode == 1 and json.loads(p.stdout)["plans"][0]["applied"] is False
    assert not (nobody.home / "state" / "evaldesk" / "journal.jsonl").exists()


def test_unreadable_files_in_the_quarantine_are_named(nobody: Nobody) -> None:
    d = job_to_dedupe(nobody.work)
    nobody.give(d)
    before = full_tree(d)
    p = nobody.run("--batch", "dedupe", "--apply", "--format", "json", str(d))
    assert p.returncode == 0, p.stderr
    [qdir] = (d / ".evaldesk-quarantine").iterdir()
    backup = qdir / "files" / "result.json.orig"
    moved = sorted((qdir / "trials").glob("task-*"))[0]

    # the original aggregate cannot be read: undo refuses, naming it, and changes nothing
    os.chown(backup, 0, 0)
    backup.chmod(0o600)
    held = full_tree(d)
    p = nobody.run("--batch", "undo", str(d))
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert f"the original of result.json cannot be read at {backup}: Permission denied" in p.stderr
    assert full_tree(d) == held
    os.chown(backup, nobody.uid, nobody.gid)

    # the record itself cannot be read: said, with its path
    record = qdir / "record.json"
    os.chown(record, 0, 0)
    record.chmod(0o600)
    p = nobody.run("--batch", "undo", str(d))
    assert p.returncode == 1 and f"cannot read the record in {qdir}: Permission denied" in p.stderr, p.stderr
    os.chown(record, nobody.uid, nobody.gid)
    record.chmod(0o644)

    # a file inside a quarantined trial nobody cannot read: renames do not read it, undo goes through
    secret = moved / "config.json"
    os.chown(secret, 0, 0)
    secret.chmod(0o000)
    rel = str(secret.relative_to(qdir / "trials"))
    p = nobody.run("--batch", "undo", "--format", "json", str(d))
    assert p.returncode == 0, p.stderr
    after = full_tree(d)
    assert after[rel][:2] == ("file", 0o000) and after[rel][2] == before[rel][2]
    after[rel] = before[rel]
    assert after == before, tree_diff(before, after)


def test_a_cross_device_rename_stops_the_plan_and_is_never_a_copy(tmp_path: Path) -> None:
    """The quarantine on another filesystem (a tmpfs mounted over it, in a private mount
    namespace): the first move fails with EXDEV, nothing is copied, the job is as it was."""
    import shutil
    import subprocess
    import sys

    from tests.support.as_nobody import _fail_or_skip
    from tests.support.writes import ROOT

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        _fail_or_skip("mounting a second filesystem needs root and unshare")
    d = job_to_dedupe(tmp_path)
    (d / ".evaldesk-quarantine").mkdir()
    before = full_tree(d)
    script = 'mount -t tmpfs tmpfs "$1" && shift && exec "$@"'
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                        str(d / ".evaldesk-quarantine"), sys.executable, "-m", "tui.cli",
                        "--batch", "dedupe", "--apply", str(d)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    if "mount:" in p.stderr:
        _fail_or_skip(p.stderr.strip())
    assert p.returncode == 1, p.stderr
    first = moves_of(d)[0]
    assert f"step 1 of 5 (move {first}) failed: Invalid cross-device link" in p.stderr
    assert "evaldesk never copies instead" in p.stderr and str(d / first) in p.stderr
    assert full_tree(d) == before, tree_diff(before, full_tree(d))
