"""The command line's own handling before a subcommand runs: a negative value glued to its option."""

from __future__ import annotations

from trainspeed.cli import _glued


def test_a_negative_size_is_glued_to_its_option_and_a_scripts_arguments_pass_as_given() -> None:
    assert _glued(["memory", "gpt", "--budget", "-1GiB"]) == ["memory", "gpt", "--budget=-1GiB"]
    assert _glued(["memory", "gpt", "--budget", "-.5GiB"]) == ["memory", "gpt", "--budget=-.5GiB"]
    # a flag after --budget stays a flag (argparse then says the value is missing), and other options are left alone
    assert _glued(["memory", "gpt", "--budget", "--json"]) == ["memory", "gpt", "--budget", "--json"]
    assert _glued(["memory", "gpt", "--margin", "-0.1"]) == ["memory", "gpt", "--margin", "-0.1"]
    # a script's own arguments pass as given, and after `--` everything is as given
    assert _glued(["doctor", "train.py", "--budget", "-1"]) == ["doctor", "train.py", "--budget", "-1"]
    assert _glued(["memory", "--", "--budget", "-1"]) == ["memory", "--", "--budget", "-1"]


def test_output_in_a_log_has_no_trailing_spaces_and_no_colour(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from trainspeed.cli import main

    assert main(["hw"]) == 0  # not a terminal: rich would pad every line of the table to the width
    out = capsys.readouterr().out
    assert out.strip() and all(line == line.rstrip() for line in out.splitlines())
    monkeypatch.setenv("FORCE_COLOR", "1")  # styling asked for by the environment: --no-color wins
    assert main(["--no-color", "hw"]) == 0
    assert "\x1b[" not in capsys.readouterr().out
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["hw"]) == 0
    assert "\x1b[" not in capsys.readouterr().out


def test_the_command_line_loads_the_progress_bars_only_for_the_commands_that_draw_them() -> None:
    """rich.progress (with rich.live) took about 0.1 s of every `trainspeed doctor` process, which draws no bar: the
    demo and the sweep import it where they draw one."""
    import subprocess
    import sys

    code = "import sys, trainspeed.cli, trainspeed.doctor; print('rich.progress' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False"]
