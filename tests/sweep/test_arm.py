"""The arm is the plain loop a user writes: same parameters as a hand-written loop, knobs doing what they say."""

import torch

from trainspeed.sweep.arm import Arm, ArmConfig
from trainspeed.workloads.catalog import builtin_workload


def plain_iris(steps):
    wl = builtin_workload("iris")
    model, (x, y) = wl.model(), wl.data()
    opt, loss_fn = wl.optimizer(model.parameters()), wl.loss()
    for _ in range(steps):
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return model


def test_arm_trains_exactly_like_the_plain_loop():
    arm = Arm(builtin_workload("iris"), ArmConfig(record_every=3))
    setup = arm.build(warmup=4)  # 1 first step + 4 warm-up steps
    seconds, extras = arm.run(10)
    assert seconds > 0 and setup.first_step_s > 0 and setup.batch_size == 120
    assert extras["reads"] == 3  # counted from the trial's start: steps 3, 6, 9 of 10
    ref = plain_iris(15)
    for a, b in zip(arm.model.parameters(), ref.parameters()):
        assert torch.equal(a, b)
    arm.close()


def test_accumulated_step_matches_the_whole_batch():
    wl = builtin_workload("mlp", width=32, depth=1, batch=64, samples=64)
    whole, split = Arm(wl, ArmConfig()), Arm(wl, ArmConfig(accumulate=4))
    whole.build(warmup=1)
    split.build(warmup=1)
    for a, b in zip(whole.model.parameters(), split.model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_memory_ops_and_saves_are_measured():
    wl = builtin_workload("mlp", width=64, depth=2, batch=32)
    arm = Arm(wl, ArmConfig(measure_memory=True, count_ops=True, save_every=2, save_mode="thread"))
    setup = arm.build(warmup=1)
    param_bytes = sum(p.numel() * 4 for p in arm.model.parameters())
    assert setup.peak_bytes > param_bytes
    assert setup.ops_per_step > 10 and setup.flops_per_step > 6 * 32 * 64 * 64
    _, extras = arm.run(6)
    assert extras["saves"] == 3
    saved = torch.load(f"{arm.saver.folder.name}/checkpoint.pt")
    assert set(saved) == {"model", "optimizer"}
    arm.close()


def test_dataset_through_a_dataloader_and_a_too_large_batch_fails_clearly():
    wl = builtin_workload("mlp", width=16, depth=1, batch=8, samples=40)
    arm = Arm(wl, ArmConfig(loader=True))
    arm.build(warmup=1)
    arm.run(12)  # 5 batches per epoch: the loader is restarted
    arm.close()
    big = Arm(wl, ArmConfig(loader=True, batch_size=64))
    try:
        big.build(warmup=1)
    except ValueError as e:
        assert "larger than the data set (40 samples)" in str(e)
    else:
        raise AssertionError("a batch larger than the data set must fail")


def test_threads_are_restored_after_a_trial():
    before = torch.get_num_threads()
    arm = Arm(builtin_workload("iris"), ArmConfig(threads=1))
    arm.build(warmup=1)
    arm.run(2)
    assert torch.get_num_threads() == before
    arm.close()


def test_worker_processes_and_fp16_autocast_run():
    wl = builtin_workload("mlp", width=16, depth=1, batch=8, samples=64)
    arm = Arm(wl, ArmConfig(loader=True, num_workers=1, persistent_workers=True))
    arm.build(warmup=1)
    seconds, _ = arm.run(10)  # crosses an epoch: the persistent worker is reused
    assert seconds > 0
    arm.close()
    arm = Arm(builtin_workload("iris"), ArmConfig(amp="fp16", record_every=1))
    arm.build(warmup=1)
    _, extras = arm.run(3)
    assert extras["reads"] == 3 and arm.scaler is not None
    arm.close()
