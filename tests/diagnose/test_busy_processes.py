"""The busy processes of `pytest --busy N`: the line between busy processes apart from the session and of its group,
and the CPU cgroup read from /proc/<pid>/cgroup."""

from __future__ import annotations

from pathlib import Path

import pytest
from busy_processes import apart_line, cpu_cgroup, group


def test_two_busy_processes_beside_two_threads_on_two_cores_hold_4_3_cores_apart_and_1_together() -> None:
    assert apart_line(2, 2, 2) == pytest.approx((4 / 3 + 1.0) / 2)


def test_a_busy_process_holds_a_core_at_most() -> None:
    # beside one thread on 8 cores each busy process has a core of its own, grouped or not: no line to tell them
    assert apart_line(2, 8, 1) == pytest.approx(2.0)
    assert apart_line(1, 2, 2) == pytest.approx((1.0 + 2 / 3) / 2)


def test_cgroup_v1_names_the_cpu_hierarchy_s_path() -> None:
    listing = "4:memory:/process_api/8c55\n3:cpuset:/\n2:cpu,cpuacct:/docker/ab12\n0::/\n"
    assert cpu_cgroup(listing, Path("/nonexistent")) == "/docker/ab12"


def test_cgroup_v2_counts_a_cgroup_only_where_its_cpu_controller_is_enabled(tmp_path: Path) -> None:
    listing = "0::/user.slice/session-3.scope\n"
    assert cpu_cgroup(listing, tmp_path) == "/"  # no cpu.weight there: the root's share
    unit = tmp_path / "user.slice" / "session-3.scope"
    unit.mkdir(parents=True)
    (unit / "cpu.weight").write_text("100\n")
    assert cpu_cgroup(listing, tmp_path) == "/user.slice/session-3.scope"
    assert cpu_cgroup("0::/\n", tmp_path) == "/"


def test_no_cpu_controller_reads_none() -> None:
    assert cpu_cgroup("4:memory:/x\n", Path("/nonexistent")) is None


def test_this_process_s_group_is_read_or_none() -> None:
    g = group(1 << 30)  # no such process: unread, not an error
    assert g is None
