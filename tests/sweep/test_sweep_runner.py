"""The runner with stand-in arms: order, failures, resume - no training needed."""

import pytest

from trainspeed.sweep.arm import ArmConfig, Setup
from trainspeed.sweep.journal import Journal
from trainspeed.sweep.runner import ArmSpec, rotated, run_arms
from trainspeed.workloads.catalog import builtin_workload

WL = builtin_workload("iris")


class FakeArm:
    log: list = []

    def __init__(self, workload, config):
        self.value = config.threads
        self.closed = False

    def build(self, warmup):
        FakeArm.log.append(("build", self.value))
        if self.value == 99:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")
        return Setup(0.1, 0.01)

    def run(self, steps):
        FakeArm.log.append(("run", self.value))
        if self.value == 7:
            raise ValueError("boom")
        return float(self.value), {"steps": steps}

    def close(self):
        self.closed = True


def specs(*values):
    return [ArmSpec(str(v), WL, ArmConfig(threads=v)) for v in values]


def test_rotated_order():
    assert rotated([1, 2, 3], 0) == [1, 2, 3]
    assert rotated([1, 2, 3], 1) == [2, 3, 1]
    assert rotated([1, 2, 3], 4) == [2, 3, 1]


def test_rounds_are_interleaved_and_rotated():
    FakeArm.log = []
    out = run_arms(specs(1, 2, 3), steps=5, repeats=3, warmup=1, make_arm=FakeArm)
    runs = [v for kind, v in FakeArm.log if kind == "run"]
    assert runs == [1, 2, 3, 2, 3, 1, 3, 1, 2]
    assert [kind for kind, _ in FakeArm.log].count("build") == 3  # each arm built once
    assert all(t.ok and t.extras == {"steps": 5} for t in out.trials)


def test_failures_are_recorded_and_the_sweep_goes_on():
    FakeArm.log = []
    seen = []
    out = run_arms(specs(1, 99, 7), steps=5, repeats=3, warmup=1, make_arm=FakeArm,
                   on_trial=lambda t, done, total: seen.append((done, total)))
    failed = {t.value: t.error for t in out.trials if not t.ok}
    assert failed["99"].startswith("out of memory")
    assert failed["7"] == "ValueError: boom"
    assert sum(1 for t in out.trials if t.value == "1" and t.ok) == 3
    assert sum(1 for t in out.trials if t.value in ("7", "99")) == 2  # a failed arm is not retried
    assert seen[-1] == (9, 9)


def test_resume_runs_only_what_the_journal_lacks(tmp_path):
    journal = Journal(tmp_path / "j.jsonl", {"knob": "fake"})
    FakeArm.log = []
    with pytest.raises(KeyboardInterrupt):
        def stop(t, done, total):
            if done == 4:
                raise KeyboardInterrupt
        run_arms(specs(1, 2), steps=5, repeats=3, warmup=1, journal=journal, make_arm=FakeArm, on_trial=stop)
    FakeArm.log = []
    out = run_arms(specs(1, 2), steps=5, repeats=3, warmup=1, journal=journal, make_arm=FakeArm)
    assert out.resumed == 4
    assert [v for kind, v in FakeArm.log if kind == "run"] == [1, 2]  # round 2 only
    assert sorted((t.value, t.repeat) for t in out.trials) == [(v, r) for v in ("1", "2") for r in range(3)]


def test_a_sweep_on_a_busy_machine_says_so() -> None:
    from trainspeed.load.marks import LoadMark
    from trainspeed.sweep.sweep import load_note

    note = load_note(LoadMark(at=0.0, busy_s=0.0, ours_s=0.0), LoadMark(at=10.0, busy_s=15.0, ours_s=5.0))
    assert note is not None and note.startswith("other processes kept 1.0 of this machine's")
    assert load_note(LoadMark(0.0, 0.0, 0.0), LoadMark(10.0, 6.0, 5.0)) is None  # 0.1 of a core: quiet
    assert load_note(None, None) is None
