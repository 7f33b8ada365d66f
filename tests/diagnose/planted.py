"""The planted bottleneck of an example run, checked whatever the machine's load (tests that hold on a busy
machine): shared by the tests that run the doctor on examples/ (realistic scripts, frameworks, callbacks).

Under `pytest --busy N` (conftest.py: the session beside N busy processes) the planted verdict must come first as
alone: the load is the test's, and the doctor's verdicts about the script are judged apart from it. A miss there
raises PlantedMiss, which that mode measures once more and reports (conftest.py). Otherwise a run that other
processes loaded and that named another first skips, saying so."""

from __future__ import annotations

from typing import Any

import pytest

from trainspeed.load.result import OTHERS_BUSY

BUSY = 0
"""Busy processes the session runs beside (pytest --busy N; set by conftest.py)."""


class PlantedMiss(AssertionError):
    """The planted verdict was not named first (or lacked a detail it has alone): under `--busy` the one failure a
    test is measured again for, since each such miss seen came in a run the load stretched several times more than
    most (BENCHMARKS.md, "A busy machine"); any other failed assertion fails at once."""


def loaded(data: dict[str, Any]) -> bool:
    """Whether other processes kept cores busy while the run's steps were measured (the doctor then judges the
    script's verdicts on its phases less their waits for a core)."""
    return (data.get("others_cpu_cores") or 0.0) >= OTHERS_BUSY


def unloaded_verdicts(data: dict[str, Any]) -> list[dict[str, Any]]:
    """A report's verdicts less a thread_oversubscription that blames other processes on the machine (its load while
    the test ran, not the script)."""
    busy = loaded(data)
    return [v for v in data["verdicts"]
            if not (busy and v["id"] == "thread_oversubscription" and v["evidence"].startswith("other processes"))]


def took_turns(data: dict[str, Any]) -> bool:
    """Whether the run's load verdict says its threads took turns on one core (`threads_one_cpu_share`; busy
    processes of its own scheduling group): the phases less their waits then still hold each parallel op's spin, and
    the verdict says the verdicts about the script may hold it."""
    return loaded(data) and any(v["id"] == "thread_oversubscription" and "they took turns on one core" in v["evidence"]
                                for v in data["verdicts"])


def _turns_skip(data: dict[str, Any], missed: str) -> None:
    if took_turns(data):
        pytest.skip(f"the run's threads took turns on one core ({data['threads_one_cpu_share']:.0%} of the samples "
                    f"with two runnable on one CPU), and the doctor said its verdicts about the script may hold the "
                    f"spin: {missed}")


def first_planted(data: dict[str, Any], planted: str | tuple[str, ...]) -> dict[str, Any]:
    """The planted verdict, named first (a load verdict about other processes aside); `planted` a tuple where the
    planted cost is named by either of two verdicts, by the CPU (its first verdict then one of them). Where other
    processes kept the cores busy and it was not first, the test skips: under that load the script's largest cost is
    another (its parallel ops waiting for cores), and the report says so. Under `--busy` it must come first, unless
    the run's threads took turns on one core (`took_turns`), which the doctor says."""
    ids = (planted,) if isinstance(planted, str) else planted
    found = [v["id"] for v in unloaded_verdicts(data)]
    first = bool(found) and found[0] in ids
    if loaded(data) and not first and not BUSY:
        pytest.skip(f"other processes kept {data['others_cpu_cores']:.1f} cores busy: {planted} was not the run's "
                    f"largest cost then ({found})")
    if not first:
        _turns_skip(data, f"{planted} not first ({found})")
        raise PlantedMiss(f"{planted} not first: {found}\n{_summary(data)}")
    return unloaded_verdicts(data)[0]


def planted_detail(data: dict[str, Any], held: bool, what: str) -> None:
    """A detail of the planted verdict that alone it always has (`what`, `held`: whether this run's has it). Where
    other processes kept the cores busy and it does not, the test skips as `first_planted` does: the verdict is
    judged on the phases less their waits, estimates a heavy load can leave several times alone's. Under `--busy`
    it must hold."""
    if loaded(data) and not held and not BUSY:
        pytest.skip(f"other processes kept {data['others_cpu_cores']:.1f} cores busy: the planted verdict lacked "
                    f"{what} then")
    if not held:
        _turns_skip(data, f"the planted verdict lacked {what}")
        raise PlantedMiss(f"{what}\n{_summary(data)}")


def _summary(data: dict[str, Any]) -> str:
    """What a failed planted check shows: the verdicts with their predictions, the load and each phase as measured
    (share, host ms, the part lost waiting for a core), so that a run judged otherwise can be read from the log."""
    verdicts = "; ".join(f"{v['id']} {v.get('predicted_speedup')}" for v in data["verdicts"])
    phases = ", ".join(f"{name} {p['share']:.0%} {p['host_ms']:.2f} ms (waited {p.get('wait_ms') or 0.0:.2f})"
                       for name, p in data["phases"].items() if p["share"] >= 0.01)
    steps = data["steps"]
    return (f"verdicts: {verdicts}\nothers' cores: {data.get('others_cpu_cores')}; threads on one CPU: "
            f"{data.get('threads_one_cpu_share')}; median step "
            f"{steps.get('median_ms')} ms, mean {steps.get('mean_ms')} ms; phases: {phases}")
