"""FSDP2's CPU offload in the estimate: the device's peak without the host's storages, the host's apart."""

from __future__ import annotations

import pytest
import torch

from trainspeed.memory.estimate import Estimator, estimate_memory
from trainspeed.memory.offload import peak_of
from trainspeed.memory.sharded import Sharding
from trainspeed.memory.tracker import Block
from trainspeed.workloads import ZOO

GPT = ZOO["gpt"]


def _tokens(batch: int) -> torch.Tensor:
    return torch.randint(0, GPT.input_high, (batch, *GPT.input_shape))


def test_a_timeline_peaks_where_the_most_is_alive() -> None:
    blocks = [Block(1, 10, 0, "params"), Block(2, 5, 1, "forward", died=3), Block(3, 7, 2, "forward", died=4),
              Block(4, 1, 4, "backward")]
    assert peak_of(blocks) == (22, 2)  # 10 + 5 + 7 at moment 2; the second dies at 3
    assert peak_of([]) == (0, 0)


@pytest.mark.parametrize("sharding", [None, Sharding(2, "fsdp"), Sharding(4, "fsdp-no-reshard")])
def test_the_timeline_of_every_storage_peaks_as_the_tracker_did(sharding: Sharding | None) -> None:
    """The offload's device peak is this sweep over the step's storages, less the host's: over all of them it gives the
    tracker's own peak, at its moment."""
    with Estimator(GPT.factory, _tokens, warm_batch=4, sharding=sharding) as est:
        tracker, _, _ = est.replay.step(4, record_layers=False)
    assert peak_of(tracker.history) == (tracker.peak, tracker.peak_at)


def test_offload_keeps_the_shards_gradients_and_optimizer_off_the_device() -> None:
    kept = estimate_memory(GPT.factory, _tokens, 8, world_size=4, shard="fsdp")
    off = estimate_memory(GPT.factory, _tokens, 8, world_size=4, shard="fsdp", cpu_offload=True)
    assert off.cpu_offload and not kept.cpu_offload and kept.host_bytes is None
    assert off.breakdown["params"] == off.breakdown["optimizer"] == off.breakdown["grads"] == 0
    assert off.breakdown["unsharded"] > 0 and off.breakdown["activations"] == kept.breakdown["activations"]
    assert kept.total_bytes - (kept.breakdown["params"] + kept.breakdown["optimizer"] + kept.breakdown["grads"]) \
        <= off.total_bytes < kept.total_bytes
    assert off.host_bytes is not None
    assert off.host_bytes >= kept.breakdown["params"] + kept.breakdown["optimizer"]
    assert off.per_sample_bytes == pytest.approx(kept.per_sample_bytes)
    assert any("CPU offload" in n for n in off.notes)


def test_offload_is_fsdps() -> None:
    with pytest.raises(ValueError, match="CPU offload is FSDP2's"):
        Sharding(2, "zero1", cpu_offload=True)
    with pytest.raises(ValueError, match="needs a shard mode"):
        estimate_memory(GPT.factory, _tokens, 8, cpu_offload=True)
