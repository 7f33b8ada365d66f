"""Reports written atomically, readable as any file the user makes, and nothing left behind on failure."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from trainspeed._io import check_writable_file, write_atomic
from trainspeed.errors import UsageError


def test_a_new_report_gets_the_mode_the_umask_gives(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    try:
        path = write_atomic(tmp_path / "doctor.json", "{}\n")
    finally:
        os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644 and path.read_text() == "{}\n"


def test_a_report_written_again_keeps_its_files_mode(tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    path.write_text("old")
    path.chmod(0o640)
    write_atomic(path, b"new")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.read_bytes() == b"new"


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    path = tmp_path / "doctor.json"
    path.write_text("kept")
    with pytest.raises(TypeError):
        write_atomic(path, 42)  # type: ignore[arg-type]
    assert path.read_text() == "kept" and [p.name for p in tmp_path.iterdir()] == ["doctor.json"]


def test_a_symbolic_link_is_written_through_to_its_target(tmp_path: Path) -> None:
    target = tmp_path / "reports" / "doctor.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    check_writable_file(str(link))
    write_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new" and link.read_text() == "new"


def test_a_named_pipe_is_written_to_directly(tmp_path: Path) -> None:
    import threading

    pipe = tmp_path / "report.pipe"
    os.mkfifo(pipe)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_text()))
    reader.start()
    check_writable_file(str(pipe))
    write_atomic(pipe, "{}\n")
    reader.join(timeout=10)
    assert got == ["{}\n"] and stat.S_ISFIFO(pipe.stat().st_mode)  # the reader got it; still a pipe


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc here")
def test_a_path_the_file_system_refuses_is_refused_before_the_run() -> None:
    # permission bits may say yes (as root, /proc looks writable): the folder is tried for real
    with pytest.raises(UsageError, match="cannot write /proc/x"):
        check_writable_file("/proc/x")
