"""The trial parser against the two libraries it could have been built on.

    python benchmarks/parse_models.py [--trials 20000] [--repeat 5]

Reads the `result.json` bytes of a synthetic job (benchmarks/synth.py) into memory once, then times
bytes → trial fields per file for: evaldesk's parser (`services/harbor/parse.py`: orjson into a
slotted dataclass, lenient getters), a pydantic v2 model of the fields it reads, and a msgspec Struct
of the same fields (when msgspec is installed; it is not a dependency). The library models check
types only; the parser also applies DESIGN §3's rule, so it does more per file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pydantic import BaseModel, ConfigDict  # noqa: E402

from benchmarks.synth import write_job  # noqa: E402
from services.harbor.parse import parse_trial  # noqa: E402


class _Lax(BaseModel):
    model_config = ConfigDict(extra="ignore")


class PVerifier(_Lax):
    rewards: dict[str, float] | None = None


class PException(_Lax):
    exception_type: str | None = None
    exception_message: str | None = None


class PUsage(_Lax):
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None


class PModelInfo(_Lax):
    name: str | None = None


class PAgentInfo(_Lax):
    name: str | None = None
    model_info: PModelInfo | None = None


class PResult(_Lax):
    task_name: str | None = None
    trial_name: str | None = None
    source: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    verifier_result: PVerifier | None = None
    exception_info: PException | None = None
    agent_result: PUsage | None = None
    agent_info: PAgentInfo | None = None


def msgspec_decoder() -> Any:
    """A msgspec decoder of the same fields, built from Struct classes made at run time (the
    module's annotations are strings, which msgspec resolves in module scope only)."""
    try:
        import msgspec
    except ImportError:
        return None
    opt = None

    def struct(name: str, fields: dict[str, Any]) -> Any:
        return msgspec.defstruct(name, [(k, t, opt) for k, t in fields.items()])

    s, i, f = str | None, int | None, float | None
    verifier = struct("MVerifier", {"rewards": dict[str, float] | None})
    exception = struct("MException", {"exception_type": s, "exception_message": s})
    usage = struct("MUsage", {"n_input_tokens": i, "n_cache_tokens": i, "n_output_tokens": i, "cost_usd": f})
    model_info = struct("MModelInfo", {"name": s})
    agent_info = struct("MAgentInfo", {"name": s, "model_info": model_info | None})
    result = struct("MResult", {"task_name": s, "trial_name": s, "source": s, "started_at": s, "finished_at": s,
                                "verifier_result": verifier | None, "exception_info": exception | None,
                                "agent_result": usage | None, "agent_info": agent_info | None})
    return msgspec.json.Decoder(result)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        job = write_job(Path(tmp), args.trials)
        files = [(d.name, (d / "result.json").read_bytes()) for d in sorted(job.iterdir())
                 if (d / "result.json").is_file()]
    dec = msgspec_decoder()
    ways: dict[str, Any] = {
        "evaldesk parse.py (orjson + slotted dataclass)":
            lambda name, data: parse_trial(name, name, data, None, 0.0),
        "pydantic v2 model_validate_json": lambda name, data: PResult.model_validate_json(data),
    }
    if dec is not None:
        ways["msgspec Struct decode"] = lambda name, data: dec.decode(data)
    times: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(args.repeat):
        for label, fn in ways.items():
            t = time.perf_counter()
            for name, data in files:
                fn(name, data)
            times[label].append(time.perf_counter() - t)
    print(f"{len(files)} result.json files in memory, median of {args.repeat}")
    for label, ts in times.items():
        med = statistics.median(ts)
        print(f"  {label:50s} {med:.3f} s  {med / len(files) * 1e6:5.1f} µs/file")
    if dec is None:
        print("  (msgspec not installed: pip install msgspec to compare it)")


if __name__ == "__main__":
    main()
