"""fix/plan.py's diff: named from the script's repository root, taken by `git apply --check` and `patch -p1` there
(a file without a final newline too), every verdict's edit in one diff, two edits of the same lines not both
made, and a script that does not parse answered with its reason."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from patching import patch_of, verdict

from trainspeed.diagnose.verdict import Lever
from trainspeed.fix.plan import make_patch, repository_label

SCRIPT = """
    import torch

    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(20):
        model(torch.ones(4)).sum().backward()
        optimizer.step()
        torch.save(model.state_dict(), "m.pt")
        print(step)"""
SAVE = verdict("checkpoint_heavy", fix="if step % 5 == 0: torch.save(...)")
FUSED = verdict("optimizer_heavy", lever=Lever("optimizer", {"fused": True}, "torch.optim.Adam(..., fused=True)", False,
                                               match={"kind": "Adam"}))


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("patch") is None, reason="needs git and patch")
def test_the_diff_names_the_script_from_its_repository_and_git_apply_and_patch_take_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "training").mkdir(parents=True)
    _git(repo, "init", "-q")
    patch, script = patch_of(repo / "training", SCRIPT, SAVE, FUSED)  # no newline at the end
    assert patch.label == "training/train.py" == repository_label(script)
    assert [h.verdict for h in patch.hunks] == ["checkpoint_heavy", "optimizer_heavy"]
    assert patch.diff.startswith("--- a/training/train.py\n+++ b/training/train.py\n")
    assert "\\ No newline at end of file" in patch.diff
    (tmp_path / "fix.patch").write_text(patch.diff)
    checked = _git(repo, "apply", "--check", str(tmp_path / "fix.patch"))
    assert checked.returncode == 0, checked.stderr
    before = script.read_text()
    applied = subprocess.run(["patch", "-p1", "-i", str(tmp_path / "fix.patch")], cwd=repo, capture_output=True,
                             text=True)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    after = script.read_text()
    assert after != before and "fused=True" in after and "    if step % 5 == 0:\n        torch.save(" in after
    compile(after, "after", "exec")


def test_outside_a_repository_the_label_is_the_path_from_the_working_folder(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    patch, script = patch_of(tmp_path / "sub", SCRIPT, SAVE)
    if any((p / ".git").exists() for p in script.resolve().parents):
        pytest.skip("the temporary folder is inside a git repository here")
    assert patch.label == "sub/train.py"


def test_two_edits_of_the_same_lines_are_not_both_made(tmp_path: Path) -> None:
    patch, script = patch_of(tmp_path, SCRIPT)
    log = verdict("logging_heavy", fix="run it only when step % 4 == 0", site=f"{script}:9")
    save = verdict("checkpoint_heavy", fix="if step % 5 == 0: torch.save(...)")
    both = make_patch([log, save], script, script.read_text())
    assert [h.verdict for h in both.hunks] == ["logging_heavy", "checkpoint_heavy"]  # lines 9 and 8: apart
    again = make_patch([save, verdict("checkpoint_heavy", fix="if step % 7 == 0: x")], script, script.read_text())
    assert len(again.hunks) == 1 and "would edit the lines checkpoint_heavy's edit changes" in again.skipped[0].reason


def test_a_script_that_does_not_parse_gets_its_reason_for_every_verdict(tmp_path: Path) -> None:
    patch, _ = patch_of(tmp_path, "for step in range(3)\n    print(step)\n", SAVE, FUSED)
    assert not patch.hunks and not patch.diff
    assert [s.verdict for s in patch.skipped] == ["checkpoint_heavy", "optimizer_heavy"]
    assert "does not parse" in patch.skipped[0].reason
