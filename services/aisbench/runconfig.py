"""What a run was asked to do, from the config AISBench dumps into the run dir.

`ais_bench` writes the whole config it runs to `<run>/configs/<ts>_<pid>.py` (mmengine's
`Config.dump`, ais_bench/benchmark/cli/config_manager.py): `datasets=[dict(abbr='gsm8k', …), …]`
and `models=[dict(abbr='qwen3', api_key='…', …)]`. The abbrs there are the tool's own names —
the file names under `results/<model abbr>/<dataset abbr>.json` — and differ from a suite's
name (math500 → `math_prm800k_500`, humaneval → `openai_humaneval`).

The file holds the API key: it is parsed with `ast`, never run, and only the abbr strings are
kept (never a value, nor the text).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunConfig:
    models: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)


def _fields(node: ast.expr) -> dict[str, ast.expr] | None:
    """`dict(a=…)` or `{'a': …}` as name → value node; None for anything else."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return {k.arg: k.value for k in node.keywords if k.arg}
    if isinstance(node, ast.Dict):
        return {k.value: v for k, v in zip(node.keys, node.values, strict=False)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return None


def _text(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _dataset_abbr(f: dict[str, ast.expr]) -> str | None:
    # ais_bench/benchmark/utils/core/abbr.py dataset_abbr_from_cfg: abbr, else path[_name], '/' → '_'
    abbr = _text(f.get("abbr"))
    if abbr is not None:
        return abbr
    path = _text(f.get("path"))
    if path is None:
        return None
    name = _text(f.get("name"))
    return (path + (f"_{name}" if name is not None else "")).replace("/", "_")


def _items(node: ast.expr) -> list[dict[str, ast.expr]]:
    if not isinstance(node, ast.List | ast.Tuple):
        return []
    return [f for f in (_fields(e) for e in node.elts) if f is not None]


def parse_run_config(text: str) -> RunConfig:
    """The model and dataset abbrs of a dumped config. Raises ValueError if it is not Python."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:
        raise ValueError(f"not a config AISBench dumps (line {getattr(exc, 'lineno', '?')})") from None
    top: dict[str, Any] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            top[stmt.targets[0].id] = stmt.value
    cfg = RunConfig()
    for f in _items(top["models"]) if "models" in top else []:
        abbr = _text(f.get("abbr"))
        if abbr is not None and abbr not in cfg.models:
            cfg.models.append(abbr)
    for f in _items(top["datasets"]) if "datasets" in top else []:
        abbr = _dataset_abbr(f)
        if abbr is not None and abbr not in cfg.datasets:
            cfg.datasets.append(abbr)
    return cfg
