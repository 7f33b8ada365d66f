"""One rank of a sharded world (memory/sharded.py): FSDP2 replayed on fake tensors with a fake process group, DDP's
buckets and ZeRO-1's partition, and a real 2-rank step under torchrun held against the estimate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn

from trainspeed.memory import estimate as estimate_module
from trainspeed.memory.estimate import Estimator, estimate_memory
from trainspeed.memory.ranks import fewest_ranks
from trainspeed.memory.sharded import Sharding, bucket_bytes, zero1_partition
from trainspeed.workloads import ZOO

ROOT = Path(__file__).resolve().parents[2]
GPT = ZOO["gpt"]
WHOLE = 136_960 * 4  # gpt's parameters in fp32 (the head tied to the embedding: counted once)


def _tokens(batch: int) -> torch.Tensor:
    return torch.randint(0, GPT.input_high, (batch, *GPT.input_shape))


def _estimate(mode: str, world: int, optimizer: str = "adam") -> dict[str, int]:
    est = estimate_memory(GPT.factory, _tokens, 8, optimizer=optimizer, world_size=world, shard=mode)
    assert (est.world_size, est.shard) == (world, mode)
    return {**est.breakdown, "total": est.total_bytes}


def test_a_shard_mode_and_world_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown shard mode 'fsdp2'"):
        Sharding(2, "fsdp2")
    with pytest.raises(ValueError, match="at least 1"):
        Sharding(0, "ddp")
    with pytest.raises(ValueError, match="needs a shard mode"):
        estimate_memory(GPT.factory, _tokens, 8, world_size=4)


def test_fsdp_holds_a_shard_of_the_parameters_and_state_and_the_units_it_gathers() -> None:
    two, four = _estimate("fsdp", 2), _estimate("fsdp", 4)
    assert (two["params"], four["params"]) == (WHOLE // 2, WHOLE // 4)
    assert 2 * four["params"] <= four["optimizer"] < 2 * four["params"] + 1024  # Adam's moments and step counters
    assert four["unsharded"] > 0 and four["communication"] == 0
    assert four["total"] < two["total"] < _estimate("ddp", 2)["total"]
    # kept whole from forward to backward: more gathered at the peak
    assert _estimate("fsdp-no-reshard", 4)["total"] > four["total"]
    assert not dist.is_initialized()  # the fake process group is gone


@pytest.mark.parametrize("device", ["cpu", "cuda"])  # each optimizer loop: per tensor (CPU), foreach (CUDA)
def test_the_optimizer_on_local_shards_holds_the_bytes_of_the_one_on_dtensors(
        device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def estimate() -> tuple[int, dict[str, int], float]:
        est = estimate_memory(GPT.factory, _tokens, 8, optimizer="adamw", world_size=2, shard="fsdp", device=device)
        return est.total_bytes, est.breakdown, est.per_sample_bytes

    on_shards = estimate()
    monkeypatch.setattr(estimate_module, "on_local_shards", lambda factory, params: factory(params))
    assert estimate() == on_shards


def test_fsdp_mixed_precision_gathers_and_computes_in_its_dtype() -> None:
    """FSDP2's MixedPrecisionPolicy(param_dtype=bf16): the shards and the optimizer's state stay float32, the step's
    activations are bfloat16 (on 2 real ranks, gpt's estimate was a floor 1.8% to 3.7% under them)."""
    whole = _estimate("fsdp", 2)
    est = estimate_memory(GPT.factory, _tokens, 8, world_size=2, shard="fsdp", fsdp_param_dtype="bf16")
    assert est.fsdp_param_dtype == "bf16" and est.breakdown["params"] == whole["params"]
    assert est.breakdown["optimizer"] == whole["optimizer"] and est.total_bytes < 0.7 * whole["total"]
    assert est.breakdown["activations"] == pytest.approx(whole["activations"] / 2, rel=0.01)
    with pytest.raises(ValueError, match="FSDP2's mixed precision"):
        Sharding(2, "ddp", "bf16")


def test_ddp_adds_its_buckets_and_zero1_keeps_a_part_of_the_state() -> None:
    single = estimate_memory(GPT.factory, _tokens, 8)
    ddp = _estimate("ddp", 4)
    assert ddp["communication"] == WHOLE  # one bucket under 1 MiB: a copy of every gradient
    assert ddp["total"] == single.total_bytes + WHOLE and ddp["optimizer"] == single.breakdown["optimizer"]
    zero = _estimate("zero1", 4)
    assert zero["communication"] == WHOLE and zero["optimizer"] < ddp["optimizer"] / 2


def test_zero1_splits_greedily_and_the_busiest_rank_is_estimated() -> None:
    params = [nn.Parameter(torch.empty(n)) for n in (100, 60, 50, 30, 10)]
    busiest = zero1_partition(params, 2)  # 100 | 60, then 50 to 60: 110, 30 to 100: 130, 10 to 110: 120
    assert sorted(p.numel() for p in busiest) == [30, 100]
    assert sum(p.numel() for p in zero1_partition(params, 5)) == 100


def test_buckets_are_rounded_to_the_allocator() -> None:
    params = [nn.Parameter(torch.empty(1000)), nn.Parameter(torch.empty(10)), nn.Parameter(torch.empty(5),
                                                                                         requires_grad=False)]
    assert bucket_bytes(params, 1) == 4040
    assert bucket_bytes(params, 512) == 4096  # one bucket under 1 MiB
    assert bucket_bytes(params[2:], 512) == 0


def test_a_failed_replay_ends_the_fake_world() -> None:
    class Broken(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(4, 4)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("no")

    with pytest.raises(Exception, match="no"):
        Estimator(Broken, (4,), sharding=Sharding(2, "fsdp"))
    assert not dist.is_initialized()


def test_the_fewest_ranks_fit_and_one_fewer_does_not() -> None:
    usable = 8_074_035  # 7.7 MiB: gpt's batch of 8 does not fit one device (8,500,856 bytes)

    def one_rank(sharding: Sharding) -> Estimator:
        return Estimator(GPT.factory, _tokens, warm_batch=8, sharding=sharding)

    rows = {row.shard: row for row in fewest_ranks(one_rank, 8, usable)}
    assert rows["ddp"].ranks is None and rows["ddp"].confirmed  # every rank holds everything, and its buckets
    for mode in ("fsdp", "fsdp-no-reshard"):
        row = rows[mode]
        assert row.ranks is not None and row.confirmed and row.peak_bytes == _estimate(mode, row.ranks)["total"]
        assert row.peak_bytes <= usable < (_estimate(mode, row.ranks - 1)["total"] if row.ranks > 1 else 10**12)
    # ZeRO-1 shards only the optimizer's state, and no finer than a parameter tensor: gpt's 512 x 64 embedding's
    # moments stay on one rank, over what is left
    assert rows["zero1"].ranks is None and not rows["zero1"].confirmed


def test_real_ranks_hold_the_estimate(tmp_path: Path) -> None:
    """Two real ranks under torchrun (gloo, CPU): DDP's peak is the estimate to the byte on a rank that ran alone
    at its peak; FSDP2's is the estimate's floor or above it, by at most a fifth (a collective in flight keeps its
    buffers longer than the replay's, which finish at once)."""
    out = tmp_path / "rows.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sharded_memory.py"), "--models", "gpt", "--modes",
                    "ddp,fsdp-no-reshard", "--worlds", "2", "--json", str(out)], check=True, capture_output=True,
                   timeout=600)
    rows = {row["shard"]: row for row in json.loads(out.read_text())}
    ddp = rows["ddp"]
    assert any(abs(peak - ddp["estimated"]) <= 0.001 * ddp["estimated"] for peak in ddp["measured"]), ddp
    fsdp = rows["fsdp-no-reshard"]
    assert all(0.995 * fsdp["estimated"] <= peak <= 1.2 * fsdp["estimated"] for peak in fsdp["measured"]), fsdp


def test_a_process_with_a_process_group_is_told_so(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from trainspeed.cli import main

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    assert main(["memory", "gpt", "--world-size", "2", "--shard", "fsdp"]) == 2
    assert "a process group exists in this process already" in capsys.readouterr().err
