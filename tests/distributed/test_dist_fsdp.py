"""The doctor on an FSDP2 script under a 2-rank launch: the collectives timed as the comm phase, the units read, the
verdict named, and the losses untouched."""

from __future__ import annotations

import json
from pathlib import Path

from launch import launch

SCRIPT = str(Path(__file__).parents[2] / "examples" / "fsdp_train.py")
ARGS = ["--depth", "8", "--width", "32", "--epochs", "2"]


def run(args: list[str], doctor: list[str] | None = None) -> list[str]:
    """Both ranks of `fsdp_train.py ARGS` (under `trainspeed doctor DOCTOR...` if given); their outputs."""
    ranks = launch(args, doctor=doctor, script=SCRIPT, timeout=180)
    assert [r.code for r in ranks] == [0, 0], ranks[0].out + ranks[1].out
    return [r.out for r in ranks]


def test_the_doctor_times_fsdps_collectives_and_leaves_the_losses_alone(tmp_path: Path) -> None:
    run([*ARGS, "--losses", str(tmp_path / "plain.json")])
    report = tmp_path / "doctor.json"
    outs = run([*ARGS, "--losses", str(tmp_path / "watched.json")], doctor=["--json", str(report)])
    assert json.loads((tmp_path / "watched.json").read_text()) == json.loads((tmp_path / "plain.json").read_text())
    assert "Sharded (FSDP): 2 ranks (gloo), 9 sharding units" in outs[0]
    d = json.loads(report.read_text())
    dist = d["distributed"]
    assert dist["world_size"] == 2 and [r["rank"] for r in dist["ranks"]] == [0, 1]
    # 8 one-block units and the root, every one resharding (reshard_after_forward=True, given): per step each
    # all-gathers in forward and again in backward, and reduce-scatters its gradients in backward
    kinds = {c["kind"]: c for c in dist["collectives"]}
    assert (kinds["all_gather"]["calls"], kinds["all_gather"]["backward_calls"]) == (18, 9)
    assert (kinds["reduce_scatter"]["calls"], kinds["reduce_scatter"]["backward_calls"]) == (9, 9)
    block = 4 * (32 * 32 + 32 + 2 * 32)  # Linear(32, 32) and LayerNorm(32)
    root = 4 * (32 * 32 + 32 + 32 * 10 + 10)
    assert dist["fsdp"]["unit_bytes"] == [block] * 8 + [root] and dist["fsdp"]["resharding"] == 9
    assert kinds["all_gather"]["nbytes"] == 2 * (8 * block + root)
    # the host waited for every call (gloo blocks): the waits are the comm phase, inside the median step
    waited = sum(c["exposed_ms"] for c in dist["collectives"])
    comm = d["phases"]["comm"]["share"] * d["steps"]["median_ms"]
    assert 0 < comm < d["steps"]["median_ms"] and 0.5 < comm / waited < 2.0
    assert abs(sum(p["share"] for p in d["phases"].values()) - 1) < 1e-6
    assert {p["kind"] for p in dist["call_probes"]} == {"all_gather", "reduce_scatter"}
    assert all(p["ms"] > 0 for p in dist["call_probes"]) and sum(dist["fsdp_host_ms"].values()) > 0
    assert all(r["exposed_ms"] > 0 for r in dist["ranks"])


def test_one_unit_per_layer_is_named_comm_bound_with_fsdps_own_settings(tmp_path: Path) -> None:
    report = tmp_path / "doctor.json"
    run(["--depth", "24", "--epochs", "2"], doctor=["--json", str(report)])
    verdicts = json.loads(report.read_text())["verdicts"]
    assert verdicts[0]["id"] == "comm_bound", verdicts
    assert verdicts[0]["action"].startswith("shard in larger units: fully_shard every 4 consecutive units")
    assert "25 units -> 7" in verdicts[0]["action"] and "reshard_after_forward=False" in verdicts[0]["action"]
    assert verdicts[0]["predicted_speedup"] > 1.2
