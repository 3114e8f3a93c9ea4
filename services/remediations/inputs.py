"""Values a remediation needs from a person before it can plan (a launch's max-out-len …).

A remediation module may define

    async def inputs_for(exp, source, config) -> list[InputField]     # what is still missing
    async def provide_inputs(exp, source, config, values) -> None     # keep the answers

The console asks for the fields (with their guidance) before it asks for the plan; the answers
are kept by the remediation (so the plan, and its re-plan under the lock, is made from them);
`--batch` has no one to ask and reports them as needed instead.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from services.core.config import Config
from services.core.models import Experiment
from services.core.source import Source
from services.remediations.errors import WriteRefused
from services.remediations.registry import remediation


class InputField(BaseModel):
    """One whole number a person is asked for, with what to base it on."""

    name: str
    label: str
    guidance: str
    suggested: int | None = None
    minimum: int = 1
    maximum: int | None = None

    def check(self, text: str) -> int:
        """The value typed, or ValueError saying what is wrong with it."""
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError(f"{self.label}: a whole number, please") from None
        if value < self.minimum:
            raise ValueError(f"{self.label}: at least {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"{self.label}: at most {self.maximum}")
        return value


async def needed(action: str, exp: Experiment, source: Source, config: Config) -> list[InputField]:
    fn = getattr(remediation(action), "inputs_for", None)
    if fn is None:
        return []
    return list(await fn(exp, source, config))


async def provide(action: str, exp: Experiment, source: Source, config: Config, values: dict[str, Any]) -> None:
    fn = getattr(remediation(action), "provide_inputs", None)
    if fn is None:
        raise WriteRefused(f"{action} takes no input")
    await fn(exp, source, config, values)
