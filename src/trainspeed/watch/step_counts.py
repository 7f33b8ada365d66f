"""What the step running now did, counted as it runs (the step tracker's counters, zeroed at each step's end)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class StepCounts:
    """What the step running now did, counted as it runs. The calls are counted on detailed steps only (the
    per-call hooks are in), outside the optimizer's step (an LBFGS closure)."""

    syncs: int = 0
    """Reads of device tensors' values (each a synchronisation)."""
    host_reads: int = 0
    """Reads of CPU tensors' values: no synchronisation, timed in the phase they ran in."""
    h2d_bytes: int = 0
    forwards: int = 0
    """Outermost module calls."""
    backwards: int = 0
    other_steps: int = 0
    """Steps of optimizers other than the primary one."""
    model_calls: int = 0
    chained: int = 0
    """Calls of the model given a tensor that autograd has recorded (the output of an earlier call: a recurrent
    cell stepped by hand)."""
    after_read: int = 0
    """Calls of the model after a host read since its last call (an agent acting on the action it read)."""
    anomaly_s: float = 0.0
    """Seconds spent formatting Python stacks for autograd's anomaly detection (detailed steps)."""
    recompute_s: float = 0.0
    """Seconds in module calls inside backward (activation checkpointing's recompute; detailed steps)."""
    cells: int = 0
    """Calls of a recurrent cell (`watch.cells`) with gradients on."""

    def micro_batches(self) -> float:
        """Forward-and-backward passes per optimizer step: the outermost module calls (the model's, a loss
        module's) and backward calls, the fewer of the two (backward calls alone where no module is called),
        over the optimizer steps taken in it (the primary one's and those of other optimizers, a GAN's say).
        Above 1: gradients accumulated over micro-batches; a second loss's backward on one forward, or a
        forward for validation, are not."""
        passes = min(self.forwards, self.backwards) if self.forwards else self.backwards
        return max(passes, 1) / (1 + self.other_steps)  # an LBFGS step runs its passes inside the optimizer
