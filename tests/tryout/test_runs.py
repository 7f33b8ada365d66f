"""tryout/runs.py: levers tried in runs of their own, alternated with plain runs and timed; a lever that breaks the
script fails alone; with no lever nothing runs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from trainspeed.diagnose.verdict import Lever, Verdict
from trainspeed.tryout.runs import Script, candidates, try_levers

SCRIPT = """
    import torch
    from torch.utils.data import DataLoader, Dataset, get_worker_info


    class Data(Dataset):
        def __len__(self):
            return 256

        def __getitem__(self, i):
            if get_worker_info() is not None:
                raise RuntimeError("this dataset refuses worker processes")
            return torch.full((4,), float(i) / 256), i % 2


    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(100):
        for x, y in DataLoader(Data(), batch_size=16, shuffle=True):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""
THREADS = Verdict("thread_oversubscription", "e", "a", 1.2, Lever("threads", {"threads": 1}, "torch.set_num_threads(1)",
                                                                     same_arithmetic=False))
WORKERS = Verdict("input_bound", "e", "a", 1.5, Lever("dataloader", {"num_workers": 2}, "DataLoader(..., num_workers=2)",
                                                       same_arithmetic=True, match={"dataset": "Data"}))
EDIT = Verdict("evaluation_heavy", "e", "evaluate every 40 steps", 1.8)


def test_the_first_k_levers_are_chosen_and_the_edits_ranked_before_them_named() -> None:
    chosen, edits = candidates([EDIT, WORKERS, THREADS], 1)
    assert chosen == [WORKERS] and [e.verdict for e in edits] == ["evaluation_heavy"]
    chosen, edits = candidates([WORKERS, EDIT, THREADS], 2)
    assert chosen == [WORKERS, THREADS] and [e.action for e in edits] == ["evaluate every 40 steps"]


def test_no_lever_runs_nothing_and_says_so(tmp_path: Path) -> None:
    tried = try_levers([EDIT], Script(str(tmp_path / "never_run.py"), [], False, 5, 1), 2, 3)
    assert tried.rows == [] and tried.notes[0].startswith("no verdict has a lever")
    assert [e.verdict for e in tried.edits] == ["evaluation_heavy"]


def test_levers_are_timed_against_plain_runs_and_a_failing_one_fails_alone(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    monkeypatch.chdir(tmp_path)
    said: list[str] = []
    tried = try_levers([WORKERS, EDIT, THREADS], Script(str(script), [], False, 8, 1), 2, 2, out=tmp_path, say=said.append)
    failing, threads = tried.rows
    assert failing.failed == "failed: RuntimeError: this dataset refuses worker processes"
    assert failing.measured is None and len(failing.lever_s) == 0
    assert threads.failed is None and len(threads.plain_s) == len(threads.lever_s) == 2
    assert threads.measured is not None and threads.interval is not None
    assert threads.interval[0] <= threads.measured <= threads.interval[1]
    assert threads.losses is not None and threads.losses.compared == 8 and threads.losses.plain_repeat
    assert any("more --steps steady the figures" in note for note in tried.notes)  # 8 steps: far under a second
    # each run's own report, for `trainspeed compare`
    kept = tmp_path / "tried"
    for name in ("plain", "3-thread_oversubscription"):
        for r in (1, 2):
            assert json.loads((kept / name / f"doctor-{r}.json").read_text())["steps"]["seen"] == 8
    assert not (kept / "1-input_bound" / "doctor-2.json").exists()  # failed in round 1: not run again
    # alternated: round 2 runs the arms in the reverse order of round 1's
    assert [line.split(": round")[0] for line in said] == [
        "trying without a lever", "trying DataLoader(..., num_workers=2)", "trying torch.set_num_threads(1)",
        "trying torch.set_num_threads(1)", "trying without a lever"]
