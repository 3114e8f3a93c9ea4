"""What a Harbor trial dir tells about how the trial ended: exception.txt, the result's
exception_info, and the tail of the verifier's stdout. The files the log panel opens."""

from __future__ import annotations

from services.core.models import Trial, TrialStatus
from services.core.paths import UnsafePath, inside
from services.core.source import TrialEvidence, TrialFile
from services.harbor.parse import exception_details
from services.transport.fs import JobFS

TRIAL_FILES: tuple[TrialFile, ...] = (
    TrialFile("log", "trial.log", "trial.log"),
    TrialFile("exception", "exception.txt", "exception.txt"),
    TrialFile("stdout", "verifier stdout", "verifier/test-stdout.txt"),
    TrialFile("stderr", "verifier stderr", "verifier/test-stderr.txt"),
    TrialFile("agent", "agent logs", "agent/"),
)
VERIFIER_EXCERPT_BYTES = 4096
TRACEBACK_BYTES = 64 * 1024
MAX_RESULT_BYTES = 8 * 1024 * 1024


async def read_evidence(fs: JobFS, job_dir: str, trial: Trial) -> TrialEvidence:
    ev = TrialEvidence(exception_type=trial.exception_type, exception_message=trial.exception_message)
    if trial.parse_error:
        ev.problems.append(f"result.json: {trial.parse_error}")
    try:
        result_path = inside(job_dir, trial.path, "result.json")
        exc_path = inside(job_dir, trial.path, "exception.txt")
        out_path = inside(job_dir, trial.path, "verifier/test-stdout.txt")
    except UnsafePath as exc:
        ev.problems.append(str(exc))
        return ev
    # the traceback: exception.txt first, else the result's exception_info
    try:
        st = await fs.stat(exc_path)
        if st is not None and not st.is_dir:
            start = max(0, st.size - TRACEBACK_BYTES)
            ev.traceback = (await fs.read_bytes(exc_path, start, st.size - start)).decode("utf-8", errors="replace")
    except Exception as exc:
        ev.problems.append(f"exception.txt: {exc}")
    if trial.status != TrialStatus.running:
        try:
            st = await fs.stat(result_path)
            if st is not None and st.size <= MAX_RESULT_BYTES and not st.is_dir:
                kind, message, traceback = exception_details(await fs.read_bytes(result_path))
                ev.exception_type = ev.exception_type or kind
                ev.exception_message = ev.exception_message or message
                if not ev.traceback and traceback:
                    ev.traceback = traceback
            elif st is None:
                ev.problems.append("result.json: missing")
        except Exception as exc:
            if not trial.parse_error:
                ev.problems.append(f"result.json: {str(exc).splitlines()[0][:160]}")
    try:
        st = await fs.stat(out_path)
        if st is not None and not st.is_dir:
            start = max(0, st.size - VERIFIER_EXCERPT_BYTES)
            text = (await fs.read_bytes(out_path, start, st.size - start)).decode("utf-8", errors="replace")
            if start > 0:
                text = "…" + text[text.find("\n"):] if "\n" in text else text
            ev.verifier_excerpt = text
            ev.verifier_label = "verifier/test-stdout.txt (tail)"
    except Exception as exc:
        ev.problems.append(f"verifier output: {exc}")
    return ev
