"""Verdict objects: the script a command names."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainspeed.diagnose.verdict import Verdict


def test_a_command_on_the_script_names_the_script_the_doctor_ran(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from trainspeed.diagnose.verdict import YOUR_SCRIPT, named_script

    monkeypatch.chdir(tmp_path)
    (tmp_path / "my runs").mkdir()
    (tmp_path / "my runs" / "train.py").write_text("pass\n")
    v = Verdict("threads", "e", f"torch.set_num_threads(1); `trainspeed sweep threads -- {YOUR_SCRIPT}` measures", 2.0,
                title="Too many threads", brief="e", fix="torch.set_num_threads(1)")
    (named,) = named_script([v], "my runs/train.py")  # the autouse check runs each command as printed
    assert named.action.endswith("`trainspeed sweep threads -- 'my runs/train.py'` measures")
    (module,) = named_script([v], "-m json.tool")
    assert "`trainspeed sweep threads -m json.tool`" in module.action
    plain = Verdict("x", "e", "no command", None)
    assert named_script([plain], "t.py") == [plain]
