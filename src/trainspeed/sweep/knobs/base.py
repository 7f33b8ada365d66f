"""What every knob has: its values (parsed, or defaults for this machine), the arms it runs, and
the analysis that turns the measured points into findings and one line of advice."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainspeed.errors import UsageError
from trainspeed.sweep.arm import ArmConfig
from trainspeed.sweep.result import SweepPoint, SweepResult
from trainspeed.sweep.runner import ArmSpec
from trainspeed.sweep.summary import by_time
from trainspeed.workloads.workload import Workload


@dataclass
class SweepContext:
    workload: Workload
    spec: str
    device: str
    steps: int
    cuda: bool
    physical_cores: int
    logical_threads: int
    values: list[str] = field(default_factory=list)
    """The values being swept (set once parsed)."""
    save_every: int | None = None
    batches: list[int] = field(default_factory=list)
    gpu: str = "RTX 3080"
    from_spec: bool = True
    """The workload came as a spec (a name or FILE.py:FACTORY) that other processes can resolve."""
    setups: dict[str, dict] = field(default_factory=dict)
    """Per value, what building its arm measured (first step, peak bytes, ops, FLOPs)."""
    largest_fit: tuple[int | None, int, str] | None = None
    """batch-size: (largest batch predicted to fit, budget, note), estimated once."""
    _data: Any = None

    def data(self) -> Any:
        """The workload's data, built once here (a Dataset may decode files to build itself)."""
        if self._data is None:
            self._data = self.workload.data()
        return self._data

    def built(self, setups: dict[str, dict]) -> None:
        """What building each value's arm measured."""
        self.setups = setups

    def fitting(self, estimate: Callable[[], tuple[int | None, int, str]]) -> tuple[int | None, int, str]:
        """batch-size: the largest batch predicted to fit, `estimate`d once per sweep."""
        if self.largest_fit is None:
            self.largest_fit = estimate()
        return self.largest_fit


class Knob:
    name = ""
    summary = ""
    needs_cuda = False
    predicts_gpu = False
    ranks = True
    """False where values are not alternatives to one another (crossover's cells): no best is named."""
    """Without CUDA the GPU side is predicted for the reference GPU (--gpu), checked up front."""

    def score(self, p: SweepPoint, steps: int) -> tuple[float, float, float]:
        """(score, low, high), higher better; by default the negated time of the trial."""
        return by_time(p)

    def parse(self, text: str, ctx: SweepContext) -> list[str]:
        values = [v.strip() for v in text.split(",") if v.strip()]
        if not values:
            raise UsageError(f"--values for {self.name}: the list is empty")
        seen: list[str] = []
        for v in values:
            norm = self.normalise(v, ctx)
            if norm not in seen:
                seen.append(norm)
        return seen

    def normalise(self, value: str, ctx: SweepContext) -> str:  # pragma: no cover - every knob overrides
        raise NotImplementedError

    def defaults(self, ctx: SweepContext) -> list[str]:  # pragma: no cover - every knob overrides
        raise NotImplementedError

    def config(self, value: str, ctx: SweepContext) -> ArmConfig:  # pragma: no cover - every knob overrides
        raise NotImplementedError

    def arms(self, values: list[str], ctx: SweepContext) -> list[ArmSpec]:
        return [ArmSpec(v, ctx.workload, self.config(v, ctx)) for v in values]

    def analyse(self, result: SweepResult, ctx: SweepContext) -> None:
        """Add knob-specific extras, findings and the recommendation to `result` (in place)."""


ON_OFF = {"on": "on", "off": "off", "true": "on", "false": "off", "1": "on", "0": "off", "yes": "on", "no": "off"}


class OnOffKnob(Knob):
    """A knob that is either off (the plain loop) or on."""

    def normalise(self, value: str, ctx: SweepContext) -> str:
        return choice(self.name, value, ON_OFF)

    def defaults(self, ctx: SweepContext) -> list[str]:
        return ["off", "on"]


def positive_int(knob: str, text: str, what: str = "a positive integer") -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{knob}: expected {what}, got {text!r}") from None
    if value < 1:
        raise UsageError(f"{knob}: expected {what}, got {text!r}")
    return value


def choice(knob: str, text: str, allowed: dict[str, str]) -> str:
    """`allowed` maps every accepted spelling to its canonical value."""
    key = text.lower()
    if key not in allowed:
        raise UsageError(f"{knob}: expected one of {', '.join(dict.fromkeys(allowed.values()))}, got {text!r}")
    return allowed[key]


def base_config(ctx: SweepContext, **changes: object) -> ArmConfig:
    return ArmConfig(device=ctx.device, **changes)  # type: ignore[arg-type]


def ms(seconds: float | None, steps: int) -> float | None:
    return None if seconds is None else seconds / steps * 1e3
