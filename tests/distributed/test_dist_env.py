"""Reading a torchrun launch from the environment; bad launches are one clear error."""

from __future__ import annotations

import pytest
import torch

from trainspeed.distributed.env import DistEnv, detect, device_for, timeout_s
from trainspeed.errors import DistError

LAUNCH = {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500"}


def test_no_world_size_is_no_launch() -> None:
    assert detect({}) is None


def test_a_torchrun_environment_is_read() -> None:
    env = detect(LAUNCH)
    assert env == DistEnv(rank=3, local_rank=1, world_size=4, master_addr="10.0.0.5", master_port=29500)
    assert env.endpoint == "10.0.0.5:29500"


@pytest.mark.parametrize("change, message", [
    ({"RANK": None}, "RANK is not set"),
    ({"RANK": "x"}, "RANK='x' is not an integer"),
    ({"RANK": "4"}, "RANK=4 does not fit WORLD_SIZE=4"),
    ({"MASTER_ADDR": None}, "MASTER_ADDR/MASTER_PORT are not"),
    ({"WORLD_SIZE": "0"}, "does not fit WORLD_SIZE=0"),
])
def test_bad_launch_environments(change: dict, message: str) -> None:
    env = dict(LAUNCH)
    for k, v in change.items():
        if v is None:
            env.pop(k)
        else:
            env[k] = v
    with pytest.raises(DistError, match=message):
        detect(env)


def test_timeout_from_the_environment() -> None:
    assert timeout_s({}) == 300.0
    assert timeout_s({"TRAINSPEED_DIST_TIMEOUT": "2.5"}) == 2.5
    with pytest.raises(DistError, match="not a number"):
        timeout_s({"TRAINSPEED_DIST_TIMEOUT": "soon"})
    with pytest.raises(DistError, match="must be positive"):
        timeout_s({"TRAINSPEED_DIST_TIMEOUT": "0"})


def test_more_ranks_per_node_than_gpus_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    env = detect(LAUNCH)
    assert env is not None
    with pytest.raises(DistError, match=r"LOCAL_RANK=1 needs a GPU of its own but only 1 CUDA device\(s\) are visible: "
                                        r"use --nproc-per-node 1"):
        device_for(env, "cuda")
    assert device_for(env, "cpu") == torch.device("cpu")
