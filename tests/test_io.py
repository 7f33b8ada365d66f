"""Reports written atomically, readable as any file the user makes, and nothing left behind on failure."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from trainspeed._io import write_atomic


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
