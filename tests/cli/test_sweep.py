"""`trainspeed sweep`: bad input, a real small sweep with its files, and resuming."""

from __future__ import annotations

import json
import textwrap

import pytest

from trainspeed.cli import main


@pytest.mark.parametrize("argv, message", [
    (["sweep", "warp-speed", "--workload", "iris"], "unknown knob 'warp-speed'"),
    (["sweep", "threads", "--workload", "imagenet"], "unknown workload 'imagenet'"),
    (["sweep", "threads", "--workload", "iris", "--values", ","], "the list is empty"),
    (["sweep", "threads", "--workload", "iris", "--values", "1,x"], "expected a positive integer, got 'x'"),
    (["sweep", "threads", "--workload", "iris", "--repeats", "0"], "expected a positive integer, got 0"),
    (["sweep", "threads", "--workload", "iris", "--steps", "-1"], "expected a positive integer"),
    (["sweep", "crossover", "--workload", "mlp", "--batches", "8,zero"], "--batches: expected positive integers"),
    (["sweep", "device", "--workload", "iris", "--gpu", "Voodoo 5"], "no FP32 peak"),
    (["sweep", "threads", "--workload", "missing.py:make"], "missing.py: no such file"),
])
def test_bad_input_is_one_line_and_status_2(argv, message, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_factory_must_return_a_workload(tmp_path, capsys):
    f = tmp_path / "wl.py"
    f.write_text("import torch\ndef make():\n    return torch.nn.Linear(2, 2)\n")
    assert main(["sweep", "threads", "--workload", f"{f}:make", "--out", str(tmp_path / "o")]) == 2
    assert "returned Linear; a sweep needs a trainspeed.Workload" in capsys.readouterr().err


def test_user_workload_sweep_writes_json_png_table_and_resumes(tmp_path, capsys):
    f = tmp_path / "wl.py"
    f.write_text(textwrap.dedent("""
        import torch
        import trainspeed

        def make():
            g = torch.Generator().manual_seed(0)
            x, y = torch.randn(64, 8, generator=g), torch.randint(0, 2, (64,), generator=g)
            return trainspeed.Workload("tiny", lambda: torch.nn.Linear(8, 2), lambda: (x, y), batch_size=16)
    """))
    out = tmp_path / "sweep"
    argv = ["sweep", "record-every", "--workload", f"{f}:make", "--values", "1,5,never", "--steps", "20",
            "--repeats", "2", "--warmup", "1", "--out", str(out), "--json", "-"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "trainspeed.sweep/1" and data["knob"] == "record-every"
    assert [p["value"] for p in data["points"]] == ["1", "5", "never"]
    for p in data["points"]:
        assert {"value", "median_s", "ci_low", "ci_high", "ok", "error"} <= set(p)
        assert p["ok"] and p["ci_low"] <= p["median_s"] <= p["ci_high"]
    assert set(data["fit"]) == {"a", "b", "r2"}
    assert [p["records"] for p in data["points"]] == [20, 4, 0]
    assert data["recommendation"]
    assert {p.name for p in out.iterdir()} == {"trials.jsonl", "sweep.json", "sweep.png", "table.txt"}
    assert (out / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    assert len((out / "trials.jsonl").read_text().splitlines()) == 3 + 6  # 3 setups, 6 trials

    assert main(argv[:-2] + ["--repeats", "3"]) == 0  # one more round: only 3 new trials
    said = capsys.readouterr().out
    assert "resuming: 6 trials of this configuration" in said and "resumed: 6 trials" in said  # at the start too
    assert len((out / "trials.jsonl").read_text().splitlines()) == 3 + 6 + 3  # setups are not logged twice

    # another configuration (other --steps) never overwrites this one's results: refused in this --out ...
    results = (out / "sweep.json").read_text()
    other = [a if a != "20" else "30" for a in argv[:-2]]
    assert main(other) == 2
    assert "holds a sweep of another configuration" in capsys.readouterr().err
    assert (out / "sweep.json").read_text() == results
    # ... and --fresh sets this one's files aside, renamed, before starting over
    assert main([*other, "--fresh"]) == 0
    capsys.readouterr()
    kept = sorted(p.name for p in out.iterdir())
    assert len([n for n in kept if n.startswith("sweep-") and n.endswith(".json")]) == 1
    assert len([n for n in kept if n.startswith("trials-")]) == 1 and "sweep.json" in kept


def test_the_default_folder_is_one_per_configuration(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["sweep", "threads", "--workload", "iris", "--values", "1", "--repeats", "1", "--warmup", "1"]
    assert main([*argv, "--steps", "5"]) == 0
    assert main([*argv, "--steps", "6"]) == 0  # another configuration: a sibling folder
    assert main([*argv, "--steps", "5"]) == 0  # the first again: its own folder, resumed
    out, err = capsys.readouterr()
    assert "resuming: 1 trial of this configuration" in out
    # not on a terminal (a CI log): a line per finished trial, where the progress bar draws nothing
    assert err.count("trial 1 of 1: threads = 1, ") == 2
    folders = sorted(p.name for p in (tmp_path / "trainspeed-out").iterdir())
    assert folders == ["sweep-threads-iris", "sweep-threads-iris-2"]
    steps = [json.loads((tmp_path / "trainspeed-out" / f / "sweep.json").read_text())["steps"] for f in folders]
    assert steps == [5, 6]
