"""Two doctor reports side by side: what changed per step and per phase, with intervals from the runs' own
samples, and the verdicts that appeared or went away. Pure: two `doctor.json` objects in, a `Comparison` out.

The step and each phase are compared by their medians over the uniform samples the doctor keeps (JSON
`samples`: up to 256 steps each). The 95% interval of the change comes from a percentile bootstrap that
resamples both runs' samples independently. With one run a side, that interval holds the noise within a run,
not between two: two doctor runs of one unchanged script differ by a few percent on a quiet machine and by
more than 10% on a shared VM at a busy moment (BENCHMARKS.md "Comparing runs"), so a change is called real
only where its whole interval lies beyond a band (`noise`, 5% unless told). With several runs a side (A
and B each a list of reports), each side's figure is the mean of its runs' medians and the bootstrap
resamples the runs, then each chosen run's steps: the interval then holds the run-to-run spread itself,
and no band is added.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainspeed._render import Renders
from trainspeed.names import COMPARE_NOISE
from trainspeed.stats import BOOTSTRAP_RESAMPLES, resampled_medians
from trainspeed.watch.phases import PHASES

SCHEMA = "trainspeed.compare/1"
DOCTOR_SCHEMA_PREFIX = "trainspeed.doctor/"
LEVEL = 0.95
NOISE = COMPARE_NOISE
"""Run-to-run noise: a step change whose interval does not lie wholly beyond +/- this share is no real difference (two
doctor runs of one unchanged script differ by a few percent: BENCHMARKS.md, "Where the code's constants come from")."""


class CompareError(ValueError):
    """The two reports cannot be compared: one line saying why."""


@dataclass(frozen=True)
class Change:
    """One measure in both runs: its medians (ms per step), B minus A, and B over A less one, each difference
    with its 95% bootstrap interval (None where a run has no sample of it)."""

    what: str
    a_ms: float | None
    b_ms: float | None
    delta_ms: float | None = None
    delta_low: float | None = None
    delta_high: float | None = None
    change: float | None = None
    """Relative: +0.10 is B 10% slower than A. None where A's median is 0."""
    low: float | None = None
    high: float | None = None

    @property
    def real(self) -> bool:
        """Whether the interval of B minus A leaves out zero."""
        return self.delta_low is not None and self.delta_high is not None and \
            (self.delta_low > 0 or self.delta_high < 0)


@dataclass(frozen=True)
class VerdictChange:
    id: str
    status: str
    """"appeared" (in B only), "went away" (in A only) or "in both"."""
    a_predicted: float | None = None
    b_predicted: float | None = None


@dataclass(frozen=True)
class Comparison(Renders):
    a: str
    b: str
    step: Change
    phases: list[Change]
    verdicts: list[VerdictChange]
    conclusion: str
    """"faster", "slower" or "no real difference" (B against A: the step's interval beyond the noise band)."""
    line: str
    notes: list[str] = field(default_factory=list)
    noise: float = NOISE
    """The run-to-run band the step's change had to clear (0 with several runs a side: their spread is in the
    interval)."""
    a_path: str = ""
    b_path: str = ""
    """The runs as given (a file or a folder), where `a` and `b` are short names (a label, a folder's name)."""

    def slower_than(self, percent: float) -> bool:
        """Whether B's step is slower than A's by more than `percent`, with confidence: the low end of the
        interval of the relative change is above it."""
        return self.step.low is not None and self.step.low * 100 > percent


def check_report(data: Any, name: str) -> str:
    """`data`'s doctor schema, or CompareError when it is not a trainspeed doctor report."""
    schema = data.get("schema") if isinstance(data, dict) else None
    if not isinstance(schema, str) or not schema.startswith("trainspeed."):
        raise CompareError(f"{name}: not a trainspeed report (no trainspeed schema)")
    if not schema.startswith(DOCTOR_SCHEMA_PREFIX):
        raise CompareError(f"{name}: a {schema} report, not a doctor report (trainspeed doctor --json)")
    return schema


def check_keys(data: dict[str, Any], name: str) -> None:
    """CompareError where a doctor report lacks what every one holds (REQUIRED_KEYS)."""
    missing = [key for key, kind in REQUIRED_KEYS.items() if not isinstance(data.get(key), kind)]
    if missing:
        raise CompareError(f"{name}: a doctor report without {', '.join(repr(k) for k in missing)} (cut short, or "
                           "written by hand): write it again with trainspeed doctor --json")


REQUIRED_KEYS: dict[str, type] = {"steps": dict, "phases": dict, "verdicts": list}
"""What every doctor report holds and a comparison reads (docs/json.md): a report without one is not compared."""


def _sample(data: dict[str, Any], what: str) -> list[float] | None:
    samples = data.get("samples") or {}
    values = samples.get("step_ms") if what == "step" else (samples.get("phase_ms") or {}).get(what)
    if not values:
        return None
    clean = [float(v) for v in values if isinstance(v, (int, float))]
    return clean or None


def _median_of(data: dict[str, Any], what: str) -> float | None:
    """The run's own median, from its summary, where it has no sample."""
    if what == "step":
        value = (data.get("steps") or {}).get("median_ms")
    else:
        value = ((data.get("phases") or {}).get(what) or {}).get("host_ms")
    return float(value) if isinstance(value, (int, float)) else None


Samples = list[list[float]]
"""One list of per-step milliseconds per run."""


def _side(runs: Samples, rng: np.random.Generator) -> np.ndarray:
    """BOOTSTRAP_RESAMPLES bootstrap values of a side's figure (the mean of its runs' medians): the runs
    resampled, then each chosen run's steps."""
    if len(runs) == 1:
        return resampled_medians(runs[0], rng)
    medians = np.stack([resampled_medians(r, rng) for r in runs])  # (runs, resamples): each run's steps resampled
    pick = rng.integers(0, len(runs), size=(BOOTSTRAP_RESAMPLES, len(runs)))  # the runs resampled
    return np.take_along_axis(medians.T, pick, axis=1).mean(axis=1)


def change(what: str, a: list[float] | Samples | None, b: list[float] | Samples | None, a_ms: float | None = None,
           b_ms: float | None = None, seed: int = 0) -> Change:
    """Each side's figure (its median; with several runs, the mean of their medians), and the bootstrap
    intervals of B - A and of B / A - 1. A side is one run's samples or a list of runs' samples. Without both:
    the medians given, no interval."""
    if not a or not b:
        delta = b_ms - a_ms if a_ms is not None and b_ms is not None else None
        rel = delta / a_ms if delta is not None and a_ms else None
        return Change(what, a_ms, b_ms, delta, change=rel)
    runs_a: Samples = a if isinstance(a[0], list) else [a]
    runs_b: Samples = b if isinstance(b[0], list) else [b]
    ma = float(np.mean([np.median(r) for r in runs_a]))
    mb = float(np.mean([np.median(r) for r in runs_b]))
    rng = np.random.default_rng(seed)
    da, db = _side(runs_a, rng), _side(runs_b, rng)
    tail = (1 - LEVEL) / 2
    d_low, d_high = np.quantile(db - da, [tail, 1 - tail])
    rel = low = high = None
    if ma > 0 and np.all(da > 0):
        rel = mb / ma - 1
        low, high = (float(v) for v in np.quantile(db / da - 1, [tail, 1 - tail]))
    return Change(what, ma, mb, mb - ma, float(d_low), float(d_high), rel, low, high)


def _verdicts(a: dict[str, Any], b: dict[str, Any]) -> list[VerdictChange]:
    def by_id(data: dict[str, Any]) -> dict[str, float | None]:
        return {v["id"]: v.get("predicted_speedup") for v in data.get("verdicts") or [] if isinstance(v, dict)}

    va, vb = by_id(a), by_id(b)
    out = [VerdictChange(i, "appeared", None, vb[i]) for i in vb if i not in va]
    out += [VerdictChange(i, "went away", va[i], None) for i in va if i not in vb]
    out += [VerdictChange(i, "in both", va[i], vb[i]) for i in va if i in vb]
    return out


Report = dict[str, Any]


def _runs(side: Report | list[Report]) -> list[Report]:
    return side if isinstance(side, list) else [side]


def _samples(runs: list[Report], what: str) -> Samples | None:
    found = [_sample(r, what) for r in runs]
    return None if any(s is None for s in found) else found  # type: ignore[return-value]


def _mean_median(runs: list[Report], what: str) -> float | None:
    values = [_median_of(r, what) for r in runs]
    return None if any(v is None for v in values) else float(np.mean(values))  # type: ignore[arg-type]


def compare(a: Report | list[Report], b: Report | list[Report], a_name: str = "A", b_name: str = "B",
            noise: float = NOISE) -> Comparison:
    """B against A, each one report or several runs of the same script. `noise`: the run-to-run band (a share
    of the step) a real change must clear where a side has a single run. CompareError where a report is not a
    doctor report, or the reports' schemas differ."""
    runs_a, runs_b = _runs(a), _runs(b)
    if not runs_a or not runs_b:
        raise CompareError(f"{a_name if not runs_a else b_name}: no doctor report")
    schemas = {check_report(r, name) for runs, name in ((runs_a, a_name), (runs_b, b_name)) for r in runs}
    if len(schemas) > 1:
        sa, sb = check_report(runs_a[0], a_name), check_report(runs_b[-1], b_name)
        raise CompareError(f"different schema versions: {a_name} is {sa}, {b_name} is {sb}" if sa != sb else
                           f"different schema versions among the runs: {', '.join(sorted(schemas))}")
    for runs, name in ((runs_a, a_name), (runs_b, b_name)):
        if any(_sample(r, "step") is None and _median_of(r, "step") is None for r in runs):
            raise CompareError(f"{name}: a doctor report with no measured step (no step time and no step samples): "
                               "nothing to compare")
        for r in runs:
            check_keys(r, name)
    notes = []
    single = len(runs_a) == 1 or len(runs_b) == 1
    band = noise if single else 0.0
    step = change("step", _samples(runs_a, "step"), _samples(runs_b, "step"), _mean_median(runs_a, "step"),
                  _mean_median(runs_b, "step"))
    phases = [change(ph, _samples(runs_a, ph), _samples(runs_b, ph), _mean_median(runs_a, ph),
                     _mean_median(runs_b, ph), seed=i + 1)
              for i, ph in enumerate(PHASES)
              if _mean_median(runs_a, ph) is not None or _mean_median(runs_b, ph) is not None]
    first = runs_a[0]
    for runs, name in ((runs_a, a_name), (runs_b, b_name)):
        if _samples(runs, "step") is None:
            notes.append(f"{name} holds no step sample (written by an earlier trainspeed): medians compared, "
                         "no interval")
        for r in runs:
            if (r.get("device"), r.get("script")) != (first.get("device"), first.get("script")):
                notes.append(f"{name} ran {r.get('script')} on {r.get('device')}, {a_name} ran {first.get('script')} "
                             f"on {first.get('device')}")
                break
    if not single:
        notes.append(f"{len(runs_a)} runs of {a_name} and {len(runs_b)} of {b_name}: each side is the mean of its "
                     "runs' medians, and the interval resamples the runs, so it holds their spread")
    if step.low is None or step.high is None:
        conclusion = "no real difference"
        line = "no interval to judge by: " + (f"median step {step.a_ms:.3f} ms in {a_name}, {step.b_ms:.3f} ms in "
                                              f"{b_name}" if step.a_ms is not None and step.b_ms is not None
                                              else "a run has no median step")
    else:
        conclusion = "slower" if step.low > band else "faster" if step.high < -band else "no real difference"
        rel = step.change or 0.0
        inside = (f", not wholly beyond the run-to-run noise of +/-{band:.0%}" if band else "")
        words = {"slower": f"{b_name} is {rel:.1%} slower per step than {a_name}",
                 "faster": f"{b_name} is {-rel:.1%} faster per step than {a_name}",
                 "no real difference": f"no real difference between {a_name} and {b_name} per step "
                                       f"({rel:+.1%}{inside})"}
        line = (f"{words[conclusion]}: median {step.a_ms:.3f} ms against {step.b_ms:.3f} ms, 95% interval of the "
                f"change {step.low:+.1%} to {step.high:+.1%}")
    return Comparison(a_name, b_name, step, phases, _verdicts(runs_a[-1], runs_b[-1]), conclusion, line, notes,
                      band)
