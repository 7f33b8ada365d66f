"""The doctor under a 2-rank launch: every rank watched, rank 0 reports all, the losses untouched."""

from __future__ import annotations

import json
from pathlib import Path

from launch import launch
from planted import first_planted


def test_watching_ddp_changes_no_loss_and_rank_0_reports_every_rank(tmp_path: Path) -> None:
    plain = launch(["losses", str(tmp_path / "plain.json"), "40"])
    assert [r.code for r in plain] == [0, 0], plain[0].out + plain[1].out
    report = tmp_path / "doctor.json"
    watched = launch(["losses", str(tmp_path / "watched.json"), "40"], doctor=["--json", str(report)])
    assert [r.code for r in watched] == [0, 0], watched[0].out + watched[1].out
    # DDP's reduction replaced by the timed hook: the same gradients, so the same losses bit for bit
    assert json.loads((tmp_path / "watched.json").read_text()) == json.loads((tmp_path / "plain.json").read_text())
    assert "rank 1 watched its steps; rank 0 reports for every rank" in watched[1].out
    d = json.loads(report.read_text())
    dist = d["distributed"]
    assert dist["world_size"] == 2 and dist["backend"] == "gloo" and [r["rank"] for r in dist["ranks"]] == [0, 1]
    assert dist["comm_ms"] > 0 and dist["grad_bytes"] == 4 * (4 * 64 + 64 + 64 * 3 + 3)
    assert "comm" in d["phases"] and abs(sum(p["share"] for p in d["phases"].values()) - 1) < 1e-6
    assert all(r["comm_bytes"] == dist["grad_bytes"] for r in dist["ranks"])


def test_a_planted_straggler_is_named(tmp_path: Path) -> None:
    report = tmp_path / "doctor.json"
    ranks = launch(["losses", str(tmp_path / "w.json"), "60", "1"], doctor=["--json", str(report)])
    assert [r.code for r in ranks] == [0, 0], ranks[0].out + ranks[1].out
    d = json.loads(report.read_text())
    # the other rank's CPU is the job's, not another process's: on a quiet machine the run is not called shared
    straggler = first_planted(d, "straggler")
    assert straggler["evidence"].startswith("rank 1 ") and "its other phase" in straggler["evidence"]


def test_under_torchrun_every_rank_closes_the_window_at_the_same_step(tmp_path: Path) -> None:
    """`--window` on a DDP job: each rank closes it after the same step (no rank waits on another to know when), rank
    0's report holds every rank and is written while the job trains on, and no loss changes."""
    plain = launch(["losses", str(tmp_path / "plain.json"), "120"])
    assert [r.code for r in plain] == [0, 0], plain[0].out + plain[1].out
    report = tmp_path / "doctor.json"
    watched = launch(["losses", str(tmp_path / "watched.json"), "120"],
                     doctor=["--window", "20:60", "--json", str(report)])
    assert [r.code for r in watched] == [0, 0], watched[0].out + watched[1].out
    assert json.loads((tmp_path / "watched.json").read_text()) == json.loads((tmp_path / "plain.json").read_text())
    d = json.loads(report.read_text())
    assert (d["window"]["opened_at"], d["window"]["closed_at"], d["steps"]["seen"]) == (20, 60, 40)
    assert [r["rank"] for r in d["distributed"]["ranks"]] == [0, 1]
    assert [r["steps_measured"] for r in d["distributed"]["ranks"]] == [d["steps"]["measured"]] * 2
