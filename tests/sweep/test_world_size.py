"""`world-size`: the ring all-reduce and step-time models on recorded numbers, the knob's values and
advice, and real 1- and 2-rank torchrun launches on the CPU (gloo)."""

import os
import sys
import textwrap

import pytest
import torch

from trainspeed.errors import UsageError
from trainspeed.sweep.knobs.world_size import comm_model, comm_ms, portable_spec
from trainspeed.sweep.result import SweepPoint, SweepResult
from trainspeed.sweep.summary import best_and_ties
from trainspeed.sweep.sweep import execute, plan, run_sweep
from trainspeed.sweep.world_arm import WorldConfig, launch_command, launch_env, rank_failure
from trainspeed.workloads.catalog import resolve_workload

MIB = 2**20


def test_comm_model_separates_latency_from_bandwidth():
    # a ring of K ranks: 2(K-1) hops of 50 us each, plus 2(K-1)/K x 4 MiB at 1 ms per MiB per link
    latency, per_byte = 0.05, 1.0 / MIB
    grad = 4 * MIB
    timed = {k: (comm_ms(k, latency, per_byte, grad), 2 * (k - 1) * latency) for k in (2, 4)}
    got = comm_model(timed, grad)
    assert got is not None
    assert got[0] == pytest.approx(latency) and got[1] == pytest.approx(per_byte)
    assert comm_ms(1, latency, per_byte, grad) == 0.0
    assert comm_ms(8, latency, per_byte, grad) == pytest.approx(14 * 0.05 + 1.75 * 4)
    assert comm_model({}, grad) is None


def test_values_and_defaults(monkeypatch):
    k, ctx = plan("world-size", "iris")
    assert ctx.values == [str(n) for n in (1, 2, 4, 8, 16, 32, 64) if n <= ctx.physical_cores] + (
        [str(ctx.physical_cores)] if ctx.physical_cores not in (1, 2, 4, 8, 16, 32, 64) else [])
    ctx.physical_cores = 6
    assert k.defaults(ctx) == ["1", "2", "4", "6"]
    assert [k.threads(n, ctx) for n in (1, 2, 4, 6)] == [6, 3, 1, 1]
    ctx.device = "cuda"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert k.defaults(ctx) == ["1"]
    with pytest.raises(UsageError, match="2 ranks cannot run here: 1 GPU"):
        k.normalise("2", ctx)
    assert k.threads(1, ctx) == 0


def test_a_workload_object_cannot_cross_to_other_processes():
    k, ctx = plan("world-size", resolve_workload("iris"), "1")
    with pytest.raises(UsageError, match="give it as a spec"):
        k.arms(ctx.values, ctx)


def test_file_specs_are_made_absolute(tmp_path, monkeypatch):
    (tmp_path / "w.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert portable_spec("w.py:make") == f"{tmp_path / 'w.py'}:make"
    assert portable_spec("mlp:width=64") == "mlp:width=64"
    assert portable_spec("pkg.mod:make") == "pkg.mod:make"


def test_launch_is_torchrun_with_threads_per_rank():
    c = WorldConfig("iris", 2, "cpu", 1)
    cmd = launch_command(c, 10, 3, "/tmp/x.json")
    assert cmd[:6] == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    assert "trainspeed.sweep.world_worker" in cmd
    env = launch_env(c)
    assert env["OMP_NUM_THREADS"] == "1" and "TRAINSPEED_DIST_TIMEOUT" in env
    import trainspeed
    assert env["PYTHONPATH"].split(os.pathsep)[0] == os.path.dirname(os.path.dirname(trainspeed.__file__))


def test_a_failed_rank_is_named_by_its_own_line():
    err = "W1122 noise\ntrainspeed-world-worker: rank 1: ValueError: batch 3 ...\nTraceback (torchrun)\n"
    assert rank_failure(err, 1) == "rank 1: ValueError: batch 3 ..."
    assert rank_failure("a\nlast words\n", 1) == "torchrun exited with status 1: last words"
    summary = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
trainspeed.sweep.world_worker FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-22_09:50:01
  host      : box
  rank      : 1 (local_rank: 1)
  exitcode  : -6 (pid: 123)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 123
============================================================
"""
    assert rank_failure(summary, 1) == ("rank 1 (local_rank: 1) ended with exit code -6 (pid: 123): "
                                        "Signal 6 (SIGABRT) received by PID 123")


def measured(value, step_ms, steps=10, **extras):
    s = step_ms * steps / 1e3
    return SweepPoint(value, s, s * 0.98, s * 1.02, True, trials=3, extras=extras)


def analysed(points, per_rank, steps=10, device="cpu"):
    k, ctx = plan("world-size", "iris", "1,2", steps=steps)
    ctx.device = device
    ctx.setups = {p.value: {"batch_size": 120} for p in points}
    ctx.setups["1"]["per_rank_ms"] = {str(n): ms for n, ms in per_rank.items()}
    result = SweepResult(k.name, ctx.spec, ctx.device, steps, 3, points)
    result.best, result.same_as_best = best_and_ties(points)
    k.analyse(result, ctx)
    return result


GRAD = 8 * MIB
PER_RANK = {2: 10.5, 4: 5.75, 8: 3.4, 16: 2.2, 32: 1.6, 64: 1.3}  # one process on batch/K, ms per step


def two_ranks(step_ms, grad=GRAD):
    return measured("2", step_ms, grad_bytes=grad, allreduce_ms=comm_ms(2, 0.05, 1.0 / MIB, grad), allreduce_one_ms=0.1)


def test_gpu_ranks_that_pay_are_recommended_and_larger_worlds_predicted(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    two = comm_ms(2, 0.05, 1.0 / MIB, GRAD)
    result = analysed([measured("1", 20.0), two_ranks(10.5 + two + 0.3)], PER_RANK, device="cuda")
    p = {q.value: q for q in result.points}
    assert p["2"].extras["speedup"] == pytest.approx(20.0 / (10.8 + two))
    assert p["2"].extras["efficiency"] == pytest.approx(p["2"].extras["speedup"] / 2)
    assert p["1"].extras["samples_per_s"] == pytest.approx(120 / 0.020)
    assert result.best == "2" and result.recommendation.startswith("2 ranks:")
    model = result.findings["scaling_model"]
    assert model["predicted"] and model["hop_latency_ms"] == pytest.approx(0.05)
    assert model["link_gbs"] == pytest.approx(MIB / 1e6)
    assert model["overhead_ms"] == pytest.approx(0.3)  # DDP's own cost, from the 2-rank run
    four = p["4"]
    assert four.predicted and four.ci_low is None
    assert four.extras["step_ms"] == pytest.approx(5.75 + comm_ms(4, 0.05, 1.0 / MIB, GRAD) + 0.3)
    assert [q.value for q in result.points if q.predicted] == ["4", "8", "16", "32", "64"]


def test_cpu_predicts_machines_and_says_stay_on_one_when_ranks_share_the_cores():
    result = analysed([measured("1", 20.0), two_ranks(24.0)], PER_RANK)
    assert result.best == "1"
    assert result.recommendation.startswith("stay on one process here") and "2 ranks 0.83x" in result.recommendation
    assert "the all-reduce outweighs the split work" in result.recommendation  # 8 MiB at 1 GB/s: > the saving
    small = analysed([measured("1", 20.0), two_ranks(24.0, grad=MIB)], PER_RANK)
    assert "on 16 machines like this one it is predicted to run" in small.recommendation
    predicted = [q for q in result.points if q.predicted]
    assert [q.value for q in predicted] == [f"{k} machines" for k in PER_RANK]
    two = predicted[0]
    assert two.extras["step_ms"] == pytest.approx(10.5 + comm_ms(2, 0.05, 1.0 / MIB, GRAD))  # no DDP overhead on a CPU
    assert result.findings["scaling_model"]["overhead_ms"] == 0.0
    assert any("machines' rows are predicted" in n for n in result.notes)


def test_only_one_rank_measured_predicts_nothing():
    result = analysed([measured("1", 1.0)], PER_RANK)
    assert not any(p.predicted for p in result.points)
    assert any("no world size above 1" in n for n in result.notes)


def test_one_and_two_ranks_run_under_torchrun():
    result = run_sweep("world-size", "iris", "1,2", steps=5, repeats=1, warmup=1)
    p = {q.value: q for q in result.points}
    assert p["1"].ok and p["2"].ok, [q.error for q in result.points]
    grads = sum(t.numel() for t in resolve_workload("iris").model().parameters()) * 4
    assert p["2"].extras["grad_bytes"] == grads
    assert p["2"].extras["allreduce_ms"] > 0 and p["2"].extras["threads_per_rank"] >= 1
    assert "allreduce_ms" not in p["1"].extras  # nothing to reduce on one rank
    assert p["2 machines"].predicted and result.findings["scaling_model"]["predicted"]
    assert set(result.findings["scaling_model"]["per_rank_ms"]) == {"2", "4", "8", "16", "32", "64"}


def test_a_rank_that_fails_is_reported_and_the_sweep_goes_on(tmp_path, monkeypatch):
    (tmp_path / "flaky.py").write_text(textwrap.dedent("""
        import os
        import torch
        from trainspeed import Workload

        def model():
            if os.environ.get("RANK") == "1":
                raise RuntimeError("rank one cannot build its model")
            return torch.nn.Linear(4, 3)

        def make():
            return Workload("flaky", model, lambda: (torch.randn(16, 4), torch.randint(0, 3, (16,))))
    """))
    monkeypatch.chdir(tmp_path)
    k, ctx = plan("world-size", "flaky.py:make", "1,2", steps=3)
    result = execute(k, ctx, repeats=1, warmup=1)
    p = {q.value: q for q in result.points}
    assert p["1"].ok
    assert not p["2"].ok and "rank 1: RuntimeError: rank one cannot build its model" in p["2"].error
