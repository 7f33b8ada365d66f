"""Per-rank peak of sharded training steps: the estimate (`trainspeed memory --world-size N --shard MODE`) against
real ranks under torchrun on the CPU (gloo).

    python benchmarks/sharded_memory.py [--worlds 2,4] [--models gpt,resnet-cnn,inplace-mlp]
        [--modes fsdp,fsdp-no-reshard,ddp,zero1] [--batch 8]     # a mode "fsdp:bf16": with MixedPrecisionPolicy

Each real rank builds the model (FSDP2: and shards it, `fully_shard` on each block and on the model), then under
torch.profiler's allocator events (DDP: wraps it, with ZeroRedundancyOptimizer for zero1) takes one warm-up step (the
optimizer's state is made, FSDP's lazy initialisation) and one measured step. Its peak is the bytes of its parameters
and buffers before the profile (a DTensor's local shard) that are still alive after it, plus the peak of the events'
running sum while the measured step ran (the
profiler does not see a block made before it start and freed in it: FSDP2's sharding frees the whole parameters, so
it is done before).
Every rank reports its own; the estimate is of the busiest rank, and the table gives its error against the nearest
and the farthest rank.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def _maker(name: str):  # type: ignore[no-untyped-def]
    from trainspeed.workloads import ZOO

    e = ZOO[name]
    if e.input_dtype.is_floating_point:
        return lambda b: torch.randn(b, *e.input_shape)
    return lambda b: torch.randint(0, e.input_high, (b, *e.input_shape))


def _storages(tensors: list[torch.Tensor]) -> list[weakref.ref[torch.UntypedStorage]]:
    """The storages holding `tensors` here (a DTensor's local shard's), each once, by weak reference."""
    found = {}
    for t in tensors:
        s = getattr(t, "_local_tensor", t).untyped_storage()
        found[id(s)] = weakref.ref(s)
    return list(found.values())


MEASURED = "trainspeed.measured_step"


def _peak_within(prof: torch.profiler.profile, name: str) -> int:
    """The peak of the allocator events' running sum (from the profile's start) while the span `name` ran: the
    steady-state step's, not the warm-up's (its lazy initialisation and the optimizer's first state)."""
    from torch._C._profiler import _EventType

    from trainspeed.memory.allocations import profiler_allocations

    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    span = None
    while stack and span is None:
        ev = stack.pop()
        if ev.tag == _EventType.TorchOp and ev.name == name:
            span = (ev.start_time_ns, ev.end_time_ns)
        stack.extend(ev.children)
    assert span is not None, f"no {name} span in the profile"
    live = 0
    peak = None
    for at, delta in sorted(profiler_allocations(prof)):
        if at > span[1]:
            break
        if at >= span[0] and peak is None:
            peak = live  # what was live as the step began
        live += delta
        if at >= span[0]:
            peak = max(peak or 0, live)
    return peak if peak is not None else live


def rank_job(name: str, mode: str, batch: int, out: str) -> None:
    """One real rank (under torchrun): its measured peak, written to `out`.RANK.json."""
    import torch.distributed as dist

    from trainspeed.memory.sharded import shard_units
    from trainspeed.memory.step import StepSetup, default_loss, input_maker, training_step
    from trainspeed.workloads import ZOO

    mode, _, param_dtype = mode.partition(":")  # "fsdp:bf16": FSDP2's MixedPrecisionPolicy
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = ZOO[name].factory().train()
    setup = StepSetup(input_maker(_maker(name)), default_loss, None, "cpu")
    if mode.startswith("fsdp"):  # sharded before the profile: the frees of blocks made before it go unrecorded
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        from trainspeed.amp import AMP_DTYPES

        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        policy = MixedPrecisionPolicy(param_dtype=AMP_DTYPES[param_dtype],
                                      reduce_dtype=torch.float32) if param_dtype else MixedPrecisionPolicy()
        for unit in shard_units(model):  # as the estimate wraps them
            fully_shard(unit, mesh=mesh, reshard_after_forward=mode == "fsdp", mp_policy=policy)
        fully_shard(model, mesh=mesh, reshard_after_forward=mode == "fsdp", mp_policy=policy)
    before = _storages([*model.parameters(), *model.buffers()])
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        if mode.startswith("fsdp"):
            wrapped = model
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
        else:  # DDP's buckets are made in its construction: profiled
            from torch.nn.parallel import DistributedDataParallel

            wrapped = DistributedDataParallel(model)
            if mode == "zero1":
                from torch.distributed.optim import ZeroRedundancyOptimizer

                optimizer = ZeroRedundancyOptimizer(model.parameters(), torch.optim.Adam, lr=1e-3, foreach=False)
            else:
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
        training_step(wrapped, optimizer, setup, batch, torch.device("cpu"))  # warm-up: state made, FSDP's lazy init
        with torch.profiler.record_function(MEASURED):
            training_step(wrapped, optimizer, setup, batch, torch.device("cpu"))
    # the storages from before the profile that are still alive: one replaced in the wrap (DDP's broadcast from rank 0
    # may) was freed unrecorded, and its successor is among the events
    kept = sum(s.nbytes() for s in (ref() for ref in before) if s is not None)
    peak = kept + _peak_within(prof, MEASURED)
    Path(f"{out}.{rank}.json").write_text(json.dumps({"rank": rank, "peak": peak}))
    dist.destroy_process_group()


def measured(name: str, mode: str, world: int, batch: int) -> list[int]:
    """Each rank's measured peak, from a torchrun of `world` processes."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "peak")
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}",
                        __file__, "--rank-job", name, mode, str(batch), out], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return [json.loads(Path(f"{out}.{r}.json").read_text())["peak"] for r in range(world)]


def estimated(name: str, mode: str, world: int, batch: int) -> tuple[int, float]:
    from trainspeed.memory.estimate import Estimator
    from trainspeed.memory.sharded import Sharding
    from trainspeed.workloads import ZOO

    t0 = time.perf_counter()
    mode, _, param_dtype = mode.partition(":")
    with Estimator(ZOO[name].factory, _maker(name), "adam", warm_batch=batch,
                   sharding=Sharding(world, mode, param_dtype or None)) as est:
        return est.peak(batch), time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="2,4")
    parser.add_argument("--models", default="gpt,resnet-cnn,inplace-mlp")
    parser.add_argument("--modes", default="fsdp,fsdp-no-reshard,ddp,zero1")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--rank-job", nargs=4, metavar=("MODEL", "MODE", "BATCH", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_job:
        name, mode, batch, out = args.rank_job
        rank_job(name, mode, int(batch), out)
        return
    sys.path.insert(0, str(ROOT / "src"))
    from trainspeed.hardware import detect_hardware

    hw = detect_hardware()
    print(f"Measured {datetime.date.today()} on {hw.cpu.model} ({hw.cpu.microarchitecture}); torch "
          f"{hw.torch_version}; gloo ranks on the CPU, Adam, fp32, batch {args.batch} per rank.\n")
    print("| model | shard | ranks | estimated (busiest rank) | measured (each rank) | nearest rank | farthest rank |"
          " estimate time |")
    print("|---|---|---:|---:|---|---:|---:|---:|")
    worst, rows = 0.0, []
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            for world in (int(w) for w in args.worlds.split(",")):
                est, seconds = estimated(name, mode, world, args.batch)
                peaks = measured(name, mode, world, args.batch)
                errors = sorted(((est - p) / p * 100 for p in peaks), key=abs)
                worst = max(worst, abs(errors[-1]))
                rows.append({"model": name, "shard": mode, "world_size": world, "estimated": est, "measured": peaks})
                print(f"| {name} | {mode} | {world} | {est:,} | {', '.join(f'{p:,}' for p in peaks)} | "
                      f"{errors[0]:+.2f}% | {errors[-1]:+.2f}% | {seconds:.1f} s |", flush=True)
    print(f"\nworst |error| of a rank {worst:.2f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
