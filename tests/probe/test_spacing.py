"""The pauses between a probe's rounds run the other probes first and sleep only what is left of them."""

from __future__ import annotations

from trainspeed.probe.spacing import Spacer


def test_a_pause_runs_queued_probes_until_its_time_is_up_and_sleeps_the_rest() -> None:
    now = [0.0]
    slept: list[float] = []
    ran: list[str] = []

    def probe(name: str, seconds: float):
        def run() -> str:
            ran.append(name)
            now[0] += seconds
            return name.upper()
        return run

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    spacer = Spacer({"a": probe("a", 0.05), "b": probe("b", 0.2), "c": probe("c", 0.01)}, sleep=sleep,
                    clock=lambda: now[0])
    spacer(0.15)  # a (0.05 s), then b, which takes the pause past its end: no sleep
    assert ran == ["a", "b"] and slept == []
    spacer(0.15)  # c (0.01 s), then the queue is empty: the rest slept
    assert ran == ["a", "b", "c"] and len(slept) == 1 and abs(slept[0] - 0.14) < 1e-9
    spacer(0.15)  # nothing left to run: a plain pause
    assert abs(slept[1] - 0.15) < 1e-9
    assert spacer.results() == {"a": "A", "b": "B", "c": "C"}


def test_the_results_run_what_no_pause_ran() -> None:
    ran: list[str] = []
    spacer = Spacer({"x": lambda: ran.append("x") or 1, "y": lambda: ran.append("y") or 2}, sleep=lambda s: None)
    assert spacer.results() == {"x": 1, "y": 2} and ran == ["x", "y"]
