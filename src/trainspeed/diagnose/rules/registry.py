"""The registry: which rules run, in which order, and how their verdicts are ranked.

A rule is a function from the measurements (`WatchResult`) and the machine's `Context` to a `Verdict` or
None. A few rules read another's verdict: `small_batch` and `cpu_faster` speak only where `launch_bound`
found per-op overhead, and `outside_work` only where `host_code_heavy` found none. To add a verdict, write
its rule in the family's module and name it in `ORDER` (and in `diagnose`'s `given` if it reads another's).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace

from trainspeed.diagnose.rules.arithmetic import compute_bound, slow_dtype
from trainspeed.diagnose.rules.compile import compile_heavy
from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.distributed import comm_bound, straggler
from trainspeed.diagnose.rules.dropout import dropout_heavy
from trainspeed.diagnose.rules.frameworks import in_framework
from trainspeed.diagnose.rules.host import anomaly_detection, host_code_heavy, logging_heavy, outside_work
from trainspeed.diagnose.rules.input import h2d_bound, input_bound
from trainspeed.diagnose.rules.launch import cpu_faster, launch_bound, small_batch, sync_bound
from trainspeed.diagnose.rules.memory import memory_pressure, page_faults, recompute_heavy
from trainspeed.diagnose.rules.optimizer import optimizer_heavy, optimizer_rebuilt, zero_grad_kept
from trainspeed.diagnose.rules.periodic import checkpoint_heavy, evaluation_heavy
from trainspeed.diagnose.rules.probes import Probe
from trainspeed.diagnose.rules.threads import thread_oversubscription, threads_unused
from trainspeed.diagnose.verdict import Verdict
from trainspeed.load.view import others_busy, without_wait
from trainspeed.watch.result import WatchResult

Rule = Callable[..., "Verdict | None"]

ORDER: tuple[Rule, ...] = (
    input_bound, compile_heavy, evaluation_heavy, checkpoint_heavy, logging_heavy, host_code_heavy, outside_work,
    sync_bound, h2d_bound, slow_dtype, dropout_heavy, anomaly_detection, optimizer_heavy, optimizer_rebuilt,
    zero_grad_kept, launch_bound, small_batch, cpu_faster, thread_oversubscription, threads_unused, recompute_heavy,
    page_faults, memory_pressure, comm_bound, straggler,
)
"""Every rule but the healthy one. Verdicts are ranked by predicted speed-up; this order breaks ties."""

LOAD_RULES: tuple[Rule, ...] = (thread_oversubscription, threads_unused)
"""The rules about the machine's load: they judge the run as measured, the others `script_view` where other
processes were busy. Each names its verdict after itself."""

def declared() -> list[Probe]:
    """The probes the rules declare (each family module's `PROBES`), in the rules' order, each once."""
    families = dict.fromkeys(sys.modules[rule.__module__] for rule in (*ORDER, compute_bound))
    return list(dict.fromkeys(probe for family in families for probe in getattr(family, "PROBES", ())))


HEALTHY_BELOW = 1.2
"""`compute_bound` (healthy) is added only where no verdict about the script (the load verdicts aside) predicts this
speed-up or more."""


def script_view(r: WatchResult) -> WatchResult | None:
    """The run the script's verdicts are judged on where other processes held the cores: its phases less their
    waits for a core (`load.view.without_wait`); None where they were not busy (a script's own threads and workers waiting
    for each other are its own cost, judged as it is alone)."""
    return without_wait(r) if others_busy(r) else None


def diagnose(r: WatchResult, c: Context) -> list[Verdict]:
    """All verdicts that apply, most important (largest predicted gain) first; healthy last. Where the run's threads
    waited for a core (`load.view.without_wait`), the load verdicts see the run as it was and the others the script's part."""
    load = {rule: rule(r, c) for rule in LOAD_RULES}
    measured, net = r, script_view(r)
    r = net or r
    launch = launch_bound(r, c)
    host = host_code_heavy(r, c)
    given: dict[Rule, Verdict | None] = {  # the rules that read another's verdict
        launch_bound: launch, host_code_heavy: host, outside_work: outside_work(r, c, host),
        small_batch: small_batch(r, c, launch), cpu_faster: cpu_faster(r, c, launch), **load,
    }
    verdicts = (given[rule] if rule in given else rule(r, c) for rule in ORDER)
    found = [v for v in verdicts if v is not None]
    if net is not None and measured.steps.median_ms and net.steps.median_ms:
        judged = (f" (judged on the phases less their waits for a core: a median step of {net.steps.median_ms:.2f} ms "
                  f"against the {measured.steps.median_ms:.2f} ms measured)")
        found = [v if v in load.values() else replace(v, evidence=v.evidence + judged) for v in found]
    found.sort(key=lambda v: v.predicted_speedup or 1.0, reverse=True)
    script = [v for v in found if v not in load.values()]  # the machine's load is not the script's to fix
    if not any(v.predicted_speedup and v.predicted_speedup >= HEALTHY_BELOW for v in script):
        healthy = compute_bound(r, c)
        if healthy is not None:
            found.append(healthy)
            if healthy.predicted_speedup is not None:  # in its place (bf16 autocast on a CPU with native bfloat16)
                found.sort(key=lambda v: v.predicted_speedup or 1.0, reverse=True)
    return in_framework(found, r)
