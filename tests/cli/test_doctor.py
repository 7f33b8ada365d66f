"""`trainspeed doctor` on real scripts: planted bottlenecks named first, the script's fate kept."""

from __future__ import annotations

import dataclasses
import json
import sys
import textwrap
from pathlib import Path

import pytest
from planted import first_planted

from trainspeed.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DOCTOR_KEYS = {"schema", "hardware", "steps", "phases", "per_step", "sync_sites", "gpu_util", "verdicts"}


def _doctor(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:  # type: ignore[type-arg]
    code = main(["doctor", "--json", "-", *argv])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.planted
@pytest.mark.parametrize(("script", "args", "first"), [
    ("seed_iris.py", ["--epochs", "1500"], "launch_bound"),
    ("slow_dataloader.py", [], "input_bound"),
    ("checkpoint_every_step.py", ["--steps", "60"], "checkpoint_heavy"),
    ("log_every_step.py", ["--steps", "1500"], "logging_heavy"),  # 600 steps: 5 to 11 samples on the write line
    ("wide_mlp.py", ["--steps", "25"], "compute_bound"),
    ("metric_every_step.py", ["--steps", "150"], "host_code_heavy"),
    ("float64_numpy.py", ["--steps", "150"], "slow_dtype"),
    ("tensor_dataset_loader.py", ["--epochs", "1"], "input_bound"),
    ("eval_too_often.py", ["--steps", "300"], "evaluation_heavy"),
    ("too_many_threads.py", ["--steps", "60"], "thread_oversubscription"),
])
def test_planted_bottleneck_is_named_first(script: str, args: list[str], first: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    extra = ["--steps", "60"] if script == "slow_dataloader.py" else []
    code, data = _doctor([*extra, str(EXAMPLES / script), *args], capsys)
    assert code == 0
    first_planted(data, first)


@pytest.mark.planted
def test_a_tensor_dataset_batched_row_by_row_is_told_to_take_its_batches_whole(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, data = _doctor([str(EXAMPLES / "tensor_dataset_loader.py"), "--epochs", "1"], capsys)
    assert code == 0
    first = first_planted(data, "input_bound")
    assert "BatchSampler" in first["action"] and "num_workers" not in first["action"]
    assert data["loaders"][0]["batchable"] and data["probe"]["loader_batched_ms"] > 0
    assert data["probe"]["loader_handover_ms"]["wall_ms"] >= data["probe"]["loader_handover_ms"]["main_ms"] > 0
    assert data["steps"]["mean_ms"] > 0


def test_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = _doctor([str(EXAMPLES / "seed_iris.py"), "--epochs", "300"], capsys)
    assert code == 0 and DOCTOR_KEYS <= set(data) and data["schema"] == "trainspeed.doctor/1"
    assert data["command"] == f"trainspeed doctor --json - {EXAMPLES / 'seed_iris.py'} --epochs 300"
    assert data["version"] and len(data["when"]) == len("2026-11-27 18:10")
    # the process a user times (start-up, set-up, the loop, what follows it) holds the loop
    assert 0 < data["process"]["loop_seconds"] < data["process"]["seconds"]
    assert data["probes_s"] > 0  # the doctor's probes after the script: timed, not part of the script's seconds
    assert set(data["steps"]) >= {"seen", "measured", "median_ms", "p90_ms"} and data["steps"]["seen"] == 300
    phases = data["phases"]
    assert set(phases) == {"data", "h2d", "forward", "backward", "optimizer", "sync", "checkpoint", "comm", "other"}
    assert all(set(p) >= {"host_ms", "device_ms", "share"} and p["device_ms"] is None for p in phases.values())
    assert abs(sum(p["share"] for p in phases.values()) - 1) < 1e-6
    assert set(data["per_step"]) >= {"syncs", "host_reads", "h2d_bytes", "ops", "kernels", "micro_batches", "anomaly_ms"}
    assert data["per_step"]["micro_batches"] == 1 and data["per_step"]["anomaly_ms"] == 0
    # on the CPU the loss's .item() waits for nothing: a read of a CPU tensor, with its line, and no sync
    assert data["per_step"]["syncs"] == 0 and data["sync_sites"] == [] and 1 <= data["per_step"]["host_reads"] < 1.1
    assert set(data["host_read_sites"][0]) == {"where", "op", "count", "total_ms"}
    assert data["host_read_sites"][0]["where"].endswith("seed_iris.py:70")
    assert data["gpu_util"]["available"] is False
    assert all(set(v) == {"id", "evidence", "action", "predicted_speedup", "predicted_process_speedup", "lever",
                          "site", "title", "brief", "fix", "unpredicted", "bound"}
               for v in data["verdicts"])
    assert all(v["title"] and v["brief"] and (v["predicted_speedup"] or v["unpredicted"]) for v in data["verdicts"])
    assert data["tried"] is None  # no --try


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent("""
        import sys
        import torch
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def step():
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
    """) + textwrap.dedent(body))
    return str(path)


def test_script_that_raises_gets_a_partial_report_and_its_status(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = _script(tmp_path, """
        for i in range(20):
            step()
        raise ValueError("diverged")
    """)
    code, data = _doctor([path], capsys)
    assert code == 1 and data["exit_code"] == 1 and "ValueError: diverged" in data["error"]
    assert data["steps"]["seen"] == 20
    # the traceback python itself would print: the script's frames, not the runner's or runpy's
    frames = [line for line in data["error"].splitlines() if line.startswith('  File "')]
    assert frames and all(path in line for line in frames), data["error"]


def test_a_missing_module_is_one_line_and_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("missing_module_xyz", "missing_package_xyz.module"):
        assert main(["doctor", "-m", name]) == 2
        err = capsys.readouterr().err
        assert err == f"trainspeed: error: -m {name}: no such module\n"


def test_system_exit_is_honoured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _script(tmp_path, """
        for i in range(10):
            step()
        sys.exit(3)
    """)
    code, data = _doctor([path], capsys)
    assert code == 3 and data["exit_code"] == 3


def test_steps_stop_the_script_cleanly_and_argv_path_are_the_scripts(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "helper_mod.py").write_text("VALUE = 7\n")
    path = _script(tmp_path, """
        import helper_mod
        assert sys.argv[1:] == ["--flag", "x"], sys.argv
        assert __name__ == "__main__"
        while True:
            step()
    """)
    code, data = _doctor(["--steps", "12", path, "--flag", "x"], capsys)
    assert code == 0 and data["steps"]["seen"] == 12


def test_module_mode_and_output_files(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "mytrain"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(textwrap.dedent("""
        import torch
        m = torch.nn.Linear(3, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(15):
            l = m(torch.randn(4, 3)).sum(); o.zero_grad(); l.backward(); o.step()
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    html = tmp_path / "r.html"
    assert main(["doctor", "--out", str(tmp_path / "out"), "--html", str(html), "-m", "mytrain"]) == 0
    (folder,) = (tmp_path / "out").iterdir()
    assert json.loads((folder / "doctor.json").read_text())["steps"]["seen"] == 15
    text = html.read_text()
    assert text.startswith("<!doctype html>") and "data:image/png;base64," in text
    assert "Verdicts" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["doctor", "no_such_script.py"], "no such script"),
    (["doctor", "."], "is a directory"),
    (["doctor", "--steps", "0", "x.py"], "positive integer"),
    (["doctor", "--steps", "x", "x.py"], "positive integer"),
    (["doctor", "--warmup", "-1", "x.py"], "whole number"),
    (["doctor", "-m", "no_such_module_xyz"], "no such module"),
    (["doctor"], "give a SCRIPT"),
])
def test_bad_input(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_unwritable_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = _script(tmp_path, "step()\n")
    assert main(["doctor", "--json", str(tmp_path / "missing" / "d.json"), script]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_script_stdout_moves_to_stderr_when_json_goes_to_stdout(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    script = _script(tmp_path, "for _ in range(5):\n    step()\nprint('hello from the script')\n")
    assert main(["doctor", "--json", "-", script]) == 0
    out, err = capsys.readouterr()
    json.loads(out)
    assert "hello from the script" in err
    assert sys.stdout is not None


def test_ctrl_c_gives_a_partial_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _script(tmp_path, """
        for i in range(8):
            step()
        raise KeyboardInterrupt
    """)
    code, data = _doctor([path], capsys)
    assert code == 130 and data["steps"]["seen"] == 8


def test_a_report_that_cannot_be_written_after_the_run_is_not_lost(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import trainspeed.report.files as report_files
    from trainspeed.errors import UsageError

    def full_disk(*args: object, **kwargs: object) -> None:
        raise UsageError("cannot write report.json: No space left on device")

    monkeypatch.setattr(report_files, "write_doctor_report", full_disk)  # the doctor's run imports it when it runs
    monkeypatch.chdir(tmp_path)
    path = _script(tmp_path, """
        for i in range(12):
            step()
    """)
    assert main(["doctor", "--json", str(tmp_path / "report.json"), path]) == 2
    out, err = capsys.readouterr()
    assert "trainspeed doctor:" in out and "12 steps seen" in out  # the summary is printed all the same
    saved = sorted(tmp_path.glob("doctor-*.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text())["steps"]["seen"] == 12
    assert err.count("\n") == 1 and "No space left on device" in err and f"saved to {saved[0]}" in err


def test_an_interrupted_run_and_a_run_without_a_step_say_so_plainly() -> None:
    from recorded_runs import CTX as ctx
    from recorded_runs import recorded, rendered

    from trainspeed.diagnose.report import judge
    from trainspeed.hardware import detect_hardware
    from trainspeed.report.html import doctor_html

    run = recorded(10.0, {"forward": 5.0})
    stopped = dataclasses.replace(judge(run, ctx, detect_hardware()), script="train.py", exit_code=130)
    assert "train.py on CPU (interrupted (Ctrl-C): the report holds the steps until then)" in rendered(stopped)
    assert "status 130" not in rendered(stopped) and "interrupted (Ctrl-C)" in doctor_html(stopped)
    failed = dataclasses.replace(stopped, exit_code=1)
    assert "(the script exited with status 1)" in rendered(failed)
    no_step = dataclasses.replace(run, steps=dataclasses.replace(run.steps, median_ms=None, p90_ms=None, measured=0,
                                                                 seen=0))
    report = judge(no_step, ctx, detect_hardware())
    assert report.verdicts == []
    text = rendered(report)
    assert "No training step completed" in text and "nothing to judge" in text and "no rule found" not in text
    assert "nothing to judge" in doctor_html(report)


def test_one_thread_on_several_cores_is_threads_unused(capsys: pytest.CaptureFixture[str]) -> None:
    from trainspeed.hardware.cpu import detect_cpu, usable_cores

    cores = min(detect_cpu().physical_cores or 1, usable_cores() or 1)
    if cores < 2:
        pytest.skip("one usable core: one thread is all of them")
    code, data = _doctor([str(EXAMPLES / "too_many_threads.py"), "--steps", "60", "--threads", "1"], capsys)
    assert code == 0
    rates = data["probe"]["threads_matmul_gflops"]
    if (data["others_cpu_cores"] or 0.0) >= 0.5:  # other processes held the cores: more threads would wait for them
        assert rates is None and "threads_unused" not in [v["id"] for v in data["verdicts"]]
        pytest.skip("other processes kept this machine's cores busy during the run")
    assert rates is not None and rates["as_run"] > 0
    if rates["advised"] < 1.5 * rates["as_run"]:
        pytest.skip(f"the probe found {cores} threads no clear gain over 1 this time ({rates}): a busy moment")
    first = data["verdicts"][0]
    assert first["id"] == "threads_unused" and f"torch.set_num_threads({cores})" in first["action"]
