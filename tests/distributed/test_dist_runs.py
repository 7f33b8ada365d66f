"""Two-process gloo runs on the CPU: fit under a launch, the seed's principle, failures that end cleanly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launch import JOB, launch


def _read(path: Path) -> dict:
    return json.loads(path.read_text())


def _single(tmp_path: Path, args: list[str]) -> dict:
    out = tmp_path / "single.json"
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    subprocess.run([sys.executable, JOB, args[0], str(out), *args[1:]], env=env, check=True, timeout=120,
                   capture_output=True)
    return _read(out)


@pytest.mark.parametrize("batch", ["none", "32", "7"])
def test_fit_on_two_ranks_trains_like_one_process(tmp_path: Path, batch: str) -> None:
    # full batch, even minibatches of a shuffled set (120 = 3 x 32 + 24), odd ones (7 rows: 4 + 3)
    out = tmp_path / "ddp.json"
    ranks = launch(["fit", str(out), batch, "6"])
    assert [r.code for r in ranks] == [0, 0], ranks[0].out + ranks[1].out
    ddp = _read(out)
    assert ddp["strategy"] == "cpu:ddp2:eager"
    assert any("rank 0 of 2 (gloo, DDP)" in line for line in ddp["explain"])
    if batch == "none":  # the same batches in the same order as one process: the same training
        one = _single(tmp_path, ["fit", batch, "6"])
        assert ddp["losses"] == pytest.approx(one["losses"], rel=1e-5, abs=1e-6)
        for a, b in zip(ddp["params"], one["params"]):
            assert a == pytest.approx(b, rel=1e-4, abs=1e-5)
    else:  # shuffled on a generator both ranks share: a real training, loss falling
        steps = 6 * -(-120 // int(batch))
        assert len(ddp["losses"]) == steps
        assert ddp["losses"][-1] < ddp["losses"][0]


@pytest.mark.parametrize("rows", [120, 7])
def test_ranks_on_shares_of_a_batch_give_the_whole_batch_gradient(tmp_path: Path, rows: int) -> None:
    """The seed's data parallelism: 2 ranks x 1/2 of the batch, all-reduced == 1 process x the batch."""
    out = tmp_path / "grads.json"
    ranks = launch(["grads", str(out), str(rows)])
    assert [r.code for r in ranks] == [0, 0], ranks[0].out + ranks[1].out
    r = _read(out)
    assert r["world"] == 2 and r["grad_size"] > 1e-3
    assert r["grad_diff"] <= 1e-6 * max(1.0, r["grad_size"])
    assert r["param_diff"] <= 1e-6


def test_a_rank_that_dies_ends_the_others_with_a_clear_message(tmp_path: Path) -> None:
    start = time.perf_counter()
    ranks = launch(["crash", str(tmp_path / "x.json")], TRAINSPEED_DIST_TIMEOUT="30", timeout=150)
    assert ranks[1].code == 3
    assert ranks[0].code != 0
    assert "a collective with the other ranks failed" in ranks[0].out, ranks[0].out
    assert time.perf_counter() - start < 120


def test_ranks_with_different_models_are_told_so(tmp_path: Path) -> None:
    ranks = launch(["mismatch", str(tmp_path / "x.json")], TRAINSPEED_DIST_TIMEOUT="30")
    assert all(r.code != 0 for r in ranks)
    assert "rank 1's model differs from rank 0's" in ranks[0].out


def test_a_rendezvous_nobody_answers_is_one_clear_error(tmp_path: Path) -> None:
    # rank 1 alone: rank 0 never comes
    ranks = launch(["fit", str(tmp_path / "x.json"), "none", "1"], ranks=[1], TRAINSPEED_DIST_TIMEOUT="3",
                   timeout=90)
    assert ranks[0].code != 0
    assert "could not form the process group at 127.0.0.1:" in ranks[0].out, ranks[0].out
