"""Verdict rules: measurements in, ranked verdicts out (pure, so tested on recorded numbers).

Each rule looks at one cause, states its evidence in numbers, names a concrete action, and predicts the
step speed-up from an explicit step-time model (labelled as a prediction). The thresholds are the smallest
share of a step worth a user's attention, not tuned to any script. One module per family of causes:

- `input`: the DataLoader and host-to-device copies
- `host`: logging, the script's own code, work outside the step, anomaly detection
- `periodic`: evaluation and checkpoints
- `launch`: per-op overhead, small batches, host reads that wait for the GPU, CPU faster than GPU
- `arithmetic`: slow dtypes and the healthy `compute_bound`
- `dropout`: random masks drawn on a CPU
- `optimizer`: unfused and rebuilt optimizers
- `threads`: too many or too few intra-op threads, a shared machine
- `memory`: memory pressure, activation checkpointing's recompute, page faults
- `distributed`: all-reduce and stragglers under torchrun
- `registry`: runs them all and ranks the verdicts; `common`: the context and step-time helpers they share
"""

from trainspeed.diagnose.rules.arithmetic import bf16_candidate, slow_dtype_candidates
from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.input import busiest_loader, loader_candidate
from trainspeed.diagnose.rules.memory import MEMORY_SHARE, page_faults_candidate
from trainspeed.diagnose.rules.optimizer import optimizer_candidate, rebuilt_candidate
from trainspeed.diagnose.rules.registry import ORDER, diagnose
from trainspeed.diagnose.rules.step_model import MAX_PREDICTED, predicted_label
from trainspeed.diagnose.rules.threads import busy_keep, matmul_side, threads_candidate

__all__ = [
    "MAX_PREDICTED", "MEMORY_SHARE", "ORDER", "Context", "bf16_candidate", "busiest_loader", "busy_keep", "diagnose", "loader_candidate",
    "matmul_side", "optimizer_candidate", "page_faults_candidate", "predicted_label", "rebuilt_candidate", "slow_dtype_candidates",
    "threads_candidate",
]
