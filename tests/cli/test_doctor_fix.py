"""`trainspeed doctor --fix`: on a planted example in a repository of its own, the patch written beside the
report, taken by `git apply --check`, tried as a patched copy by `--try` (measured beside the prediction, the same
losses), and applied by `patch -p1` to a script that then runs; bad input in one line with status 2 and nothing
overwritten; a read-only script left as it was; an edit whose patched script failed left out of the patch."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from trainspeed.cli import _glued, main
from trainspeed.cli.doctor_fix import FixRequest, after_tries
from trainspeed.diagnose.tried import Tried, TriedLever
from trainspeed.diagnose.verdict import Lever, Verdict
from trainspeed.fix.plan import make_patch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SHORT = """
import torch

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(200):
    loss = model(torch.ones(4)).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _trainspeed(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainspeed", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=900)


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("patch") is None, reason="needs git and patch")
def test_fix_and_try_on_the_checkpoint_example_write_a_patch_that_applies_and_runs(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "examples").mkdir(parents=True)
    shutil.copy(EXAMPLES / "checkpoint_every_step.py", repo / "examples")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    reports = tmp_path / "reports"
    reports.mkdir()
    done = _trainspeed("doctor", "--fix", "--try", "1", "--rounds", "2", "--steps", "60", "--json",
                       str(reports / "doctor.json"), "--", "examples/checkpoint_every_step.py", "--steps", "120",
                       cwd=repo)
    assert done.returncode == 0, done.stderr[-3000:]
    written = reports / "trainspeed.patch"  # beside the report
    assert f"Patch of examples/checkpoint_every_step.py written to {written}: apply it with" in done.stdout
    assert "+            if step % " in done.stdout  # the diff, printed whole
    data = json.loads((reports / "doctor.json").read_text())
    assert data["verdicts"][0]["id"] == "checkpoint_heavy"
    hunk = data["patch"]["hunks"][0]
    assert hunk["verdict"] == "checkpoint_heavy" and hunk["lines"] == [32, 32] and data["patch"]["written"] == str(written)
    row = data["tried"]["levers"][0]
    assert row["kind"] == "patch" and row["applied_as"] == "the patch at examples/checkpoint_every_step.py:32"
    assert row["failed"] is None and row["measured_speedup"] is not None and row["predicted_speedup"] is not None
    assert row["losses"]["same"] is True  # fewer saves: the same losses, bit for bit
    checked = subprocess.run(["git", "apply", "--check", str(written)], cwd=repo, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    original = (repo / "examples" / "checkpoint_every_step.py").read_text()
    subprocess.run(["patch", "-p1", "-i", str(written)], cwd=repo, check=True, capture_output=True)
    patched = (repo / "examples" / "checkpoint_every_step.py").read_text()
    assert patched != original and "if step % " in patched
    plain = subprocess.run([sys.executable, str(repo / "examples" / "checkpoint_every_step.py"), "--steps", "30"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert plain.returncode == 0 and plain.stdout.startswith("final loss ")


def test_the_file_may_be_left_out_before_the_script() -> None:
    assert _glued(["doctor", "--fix", "train.py"]) == ["doctor", "--fix=", "train.py"]
    assert _glued(["doctor", "--fix", "out.patch", "train.py"]) == ["doctor", "--fix", "out.patch", "train.py"]
    assert _glued(["doctor", "--fix", "--try", "train.py"]) == ["doctor", "--fix=", "--try=2", "train.py"]


def test_a_patch_file_that_exists_or_cannot_be_written_is_one_line_and_status_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('never run')\n")
    kept = tmp_path / "mine.patch"
    kept.write_text("the user's own\n")
    for argv in (["--fix", str(kept)], ["--fix", str(tmp_path / "no" / "such" / "x.patch")]):
        assert main(["doctor", *argv, str(script)]) == 2
        captured = capsys.readouterr()
        assert captured.err.count("\n") == 1 and captured.err.startswith("trainspeed: error: ")
        assert "never run" not in captured.out + captured.err
    assert kept.read_text() == "the user's own\n"


def test_a_read_only_script_is_patched_in_a_file_beside_it_and_left_as_it_was(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SHORT.replace("Linear(4, 2)", "Linear(4, 2048)").replace(
        "optimizer.step()", "optimizer.step()\n    torch.save(model.state_dict(), 'm.pt')"))  # a save every step
    script.chmod(stat.S_IRUSR | stat.S_IRGRP)
    before = script.read_bytes()
    (tmp_path / "trainspeed.patch").write_text("an earlier patch\n")
    try:
        done = _trainspeed("doctor", "--fix", "--steps", "40", "train.py", cwd=tmp_path)
    finally:
        script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert done.returncode == 0, done.stderr[-2000:]
    assert script.read_bytes() == before and (tmp_path / "trainspeed.patch").read_text() == "an earlier patch\n"
    assert "checkpoint_heavy" in done.stdout and "written to trainspeed-2.patch" in done.stdout
    assert "if step % " in (tmp_path / "trainspeed-2.patch").read_text()


def test_a_script_that_changes_while_it_runs_gets_no_patch_but_keeps_its_report(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SHORT + "open(__file__, 'a').write('# changed\\n')\n")
    out = tmp_path / "doctor.json"
    done = _trainspeed("doctor", "--fix", "--json", str(out), "train.py", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (f"trainspeed: error: {script.name} changed while the doctor ran "
                                                    "it: no patch written (run it again)")
    assert json.loads(out.read_text())["patch"] is None and not list(tmp_path.glob("*.patch"))


def test_an_edit_whose_patched_script_failed_is_left_out_with_its_error_line(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SHORT.replace("optimizer.step()", "optimizer.step()\n    torch.save(model, 'm.pt')"))
    save = Verdict("checkpoint_heavy", "e", "a", 2.0, fix="if step % 50 == 0: torch.save(...)")
    fused = Verdict("optimizer_heavy", "e", "a", 1.2, Lever("optimizer", {"fused": True}, "torch.optim.SGD(...)",
                                                             False, match={"kind": "SGD"}))
    request = FixRequest.__new__(FixRequest)
    request.script, request.text, request.path = script, script.read_text(), None
    patch = make_patch([save, fused], script, request.text)
    assert len(patch.hunks) == 2
    failed = TriedLever("optimizer_heavy", Lever("patch", {}, "the patch at train.py:5", False), 1.2, None, None, [],
                        [], failed="failed: RuntimeError: fused=True requires all the params to be floating point")
    kept = after_tries(request, patch, [save, fused], Tried([failed], [], 2, None, 1.0))
    assert [h.verdict for h in kept.hunks] == ["checkpoint_heavy"] and "fused=True" not in kept.diff
    assert kept.skipped[-1].reason == ("the patched script failed: RuntimeError: fused=True requires all the params "
                                       "to be floating point")
