"""A report survives any name: a trial dir whose name is not UTF-8 renders as \\xNN (as
term_safe shows it), no raw control character reaches the HTML or the JSON, and the page's
CSP runs only its own script, named by its hash."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from services.report.assets import JS
from tests.support.harbor_factory import healthy_job
from tui.cli import main

CSI = "\x9b"  # a C1 control: a terminal reads it as ESC [


@pytest.fixture
def odd_job(tmp_path: Path) -> Path:
    job = healthy_job(tmp_path, n_tasks=4, n_rep=1)
    job.add(f"evil{CSI}31mtask", 1.0)
    d = job.write()
    first = next(p for p in sorted(d.iterdir()) if p.is_dir())
    odd = os.fsencode(str(d)) + b"/sqlite__\xffraw"
    os.rename(bytes(first), odd)
    with open(odd + b"/result.json", "wb") as f:
        f.write(b'{"half')  # unreadable: the trial is known by its dir name alone
    return d


def test_html_report_of_odd_names(odd_job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--batch", "report", "--format", "html", str(odd_job)])
    out, err = capsys.readouterr()
    assert rc in (0, 1) and "Traceback" not in err
    assert CSI not in out and not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", out)
    assert "\\x9b31mtask" in out  # the control, shown
    script = re.search(r"<script>(.*?)</script>", out, re.S)
    assert script is not None and script.group(1) == JS
    digest = base64.b64encode(hashlib.sha256(JS.encode()).digest()).decode()
    csp = re.search(r'Content-Security-Policy" content="([^"]+)"', out)
    assert csp is not None and f"script-src 'sha256-{digest}'" in csp.group(1)
    assert "unsafe-inline" not in csp.group(1).split("script-src", 1)[1].split(";")[0]
    out.encode("utf-8")  # valid UTF-8 throughout


def test_json_report_of_odd_names(odd_job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--batch", "report", "--format", "json", str(odd_job)])
    out, err = capsys.readouterr()
    assert rc in (0, 1) and "Traceback" not in err
    assert CSI not in out and "\\u009b" in out
    data = json.loads(out)
    run = data["runs"][0]
    assert any(f"evil{CSI}31mtask" == t["task"] for t in run["tasks"])  # same value for a JSON reader
    assert '"sqlite__\\udcffraw"' in out  # the name's byte, escaped; Python reads it back exactly
    out.encode("utf-8")


def test_report_file_of_odd_names(odd_job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "r.html"
    rc = main(["--batch", "report", "-o", str(target), str(odd_job)])
    _, err = capsys.readouterr()
    assert rc in (0, 1) and "Traceback" not in err
    target.read_bytes().decode("utf-8")
