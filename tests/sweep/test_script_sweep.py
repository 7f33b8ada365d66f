"""`trainspeed sweep threads|workers -- SCRIPT`: each value a run of the user's script with the setting applied from
outside, alternated with the script as run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainspeed.cli import main
from trainspeed.errors import UsageError
from trainspeed.sweep.script import AS_RUN, check_knob, lever_for, script_values, sweep_script
from trainspeed.tryout.runs import Script

TINY = '''import torch
torch.manual_seed(0)
model = torch.nn.Linear(64, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 64), torch.randn(256, 8)
for step in range(40):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def test_the_values_a_script_takes() -> None:
    assert script_values("threads", None, 2) == [1, 2]
    assert script_values("threads", None, 6) == [1, 2, 4, 6]
    assert script_values("workers", None, 2) == [0, 1, 2]
    assert script_values("threads", "4,1,4", 2) == [1, 4]
    for knob, text in (("threads", "0"), ("threads", "-1,0"), ("workers", "-1"), ("threads", "a")):
        with pytest.raises(UsageError, match="whole numbers of at least"):
            script_values(knob, text, 2)


def test_each_value_is_a_setting_the_user_can_paste() -> None:
    assert lever_for("threads", 1).paste == "torch.set_num_threads(1)"
    workers = lever_for("workers", 2)
    assert workers.kind == "dataloader" and workers.settings == {"num_workers": 2, "persistent_workers": True}
    assert workers.match == {}  # every DataLoader the script makes
    with pytest.raises(UsageError, match="on a script it takes threads or workers"):
        check_knob("amp")


def test_a_sweep_runs_the_script_at_each_value_beside_it_as_run(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(TINY)
    result = sweep_script("threads", Script(str(script), [], False, None, 2), [1], 2, tmp_path / "runs")
    assert [p.value for p in result.points] == [AS_RUN, "1"]
    assert all(p.ok and p.trials == 2 for p in result.points), result.points
    one = result.points[1]
    assert one.extras["vs_as_run"] > 0 and one.median_s is not None and one.median_s > 0
    assert result.best in (AS_RUN, "1") and result.recommendation
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["plain", "threads-1"]


def test_the_command_the_thread_verdict_prints_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    argv = ["sweep", "threads", "--values", "1", "--repeats", "2", "--steps", "15", "--out", str(out), "--json", "-",
            "--", "examples/too_many_threads.py"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert [p["value"] for p in data["points"]] == [AS_RUN, "1"]
    assert (out / "sweep.json").exists() and (out / "table.txt").exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["sweep", "amp", "--", "examples/too_many_threads.py"], "on a script it takes threads or workers"),
    (["sweep", "threads", "--workload", "iris", "--", "examples/too_many_threads.py"], "not both"),
    (["sweep", "threads", "--device", "cpu", "--", "examples/too_many_threads.py"], "--device is for a built-in"),
    (["sweep", "threads", "--", "no_such_script.py"], "no_such_script.py"),
    (["sweep", "threads"], "give --workload SPEC"),
    (["sweep", "threads", "--values", "-1,0", "--", "examples/too_many_threads.py"], "whole numbers"),
])
def test_bad_input_is_one_line_and_status_2(argv: list[str], message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_a_kept_sweep_is_never_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sweep.json").write_text("{}")
    (tmp_path / "a-file").write_text("mine")
    script = ["--", "examples/too_many_threads.py"]
    assert main(["sweep", "threads", "--out", str(tmp_path), *script]) == 2
    assert "holds a sweep already" in capsys.readouterr().err
    assert main(["sweep", "threads", "--out", str(tmp_path / "a-file"), *script]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert (tmp_path / "sweep.json").read_text() == "{}" and (tmp_path / "a-file").read_text() == "mine"
