"""The trial parser against the ways it could have been built.

    python benchmarks/parse_models.py [--trials 20000] [--repeat 5]

Reads the `result.json` bytes of a synthetic job (benchmarks/synth.py) into memory once, then times
bytes → trial fields per file for: evaldesk's parser (`services/harbor/parse.py`: msgspec into the
Structs of `schema.py`, then DESIGN §3's rule into a slotted dataclass), that decode alone, a
pydantic v2 model of the same fields, and orjson's reading of the whole document (what a plain
orjson parser would start from, before any field is judged). Only the first does the rule.
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

import orjson  # noqa: E402
from pydantic import BaseModel, ConfigDict  # noqa: E402

from benchmarks.synth import write_job  # noqa: E402
from services.harbor import schema  # noqa: E402
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        job = write_job(Path(tmp), args.trials)
        files = [(d.name, (d / "result.json").read_bytes()) for d in sorted(job.iterdir())
                 if (d / "result.json").is_file()]
    decode = schema.DECODERS["Result"]
    ways: dict[str, Any] = {
        "evaldesk parse.py (msgspec Structs + the rule)": lambda name, data: parse_trial(name, name, data, None, 0.0),
        "msgspec decode into schema.Result alone": lambda name, data: decode(data),
        "pydantic v2 model_validate_json": lambda name, data: PResult.model_validate_json(data),
        "orjson.loads of the whole document": lambda name, data: orjson.loads(data),
    }
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


if __name__ == "__main__":
    main()
