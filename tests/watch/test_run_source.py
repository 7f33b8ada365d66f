"""watch/runner.py's run of a script's patched text (`doctor --fix --try`'s arms): the patched lines run as the
script would, with the same __file__ and sys.path[0]; an error in them is told with the patched line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainspeed.watch.runner import run_target


def test_the_patched_text_runs_as_the_script_with_its_own_file_and_folder(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('as written')\n")
    (tmp_path / "helper_for_patched.py").write_text("VALUE = 41\n")
    patched = ("import sys, helper_for_patched\n"
               "print('patched', __file__, __name__, sys.path[0], helper_for_patched.VALUE + 1)\n")
    outcome = run_target(str(script), [], False, source=patched)
    assert outcome.exit_code == 0 and outcome.error is None
    assert capsys.readouterr().out == f"patched {script} __main__ {tmp_path} 42\n"
    assert script.read_text() == "print('as written')\n" and sys.modules["__main__"].__name__ == "__main__"
    sys.modules.pop("helper_for_patched", None)


def test_an_error_in_the_patched_text_is_told_with_its_line(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("x = 1\n")
    outcome = run_target(str(script), [], False, source="x = 1\ny = x.float()\n")
    assert outcome.exit_code == 1 and outcome.error is not None
    assert "y = x.float()" in outcome.error and outcome.error.strip().endswith(
        "AttributeError: 'int' object has no attribute 'float'")
