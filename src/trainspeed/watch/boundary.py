"""Where a watched step ends: at the primary optimizer's step, or, before any optimizer has stepped, at a backward call.

`StepBoundary` answers, for each optimizer step and each outermost backward, whether a step ends there, and says so
as an `Edge`; the watcher acts on the answer.
"""

from __future__ import annotations

import enum
import weakref

import torch


class Edge(enum.Enum):
    """What an optimizer's step is to the watched steps."""

    INSIDE = "inside"
    """Another optimizer's step inside the step (a GAN's second one): counted in it."""
    ENDS = "ends"
    """The step ends (the primary optimizer's step, or one that has just become primary)."""
    FIRST = "first"
    """The first optimizer's first step: it ends the step, and the steps before it were delimited by backward calls."""


class StepBoundary:
    """The optimizer whose steps delimit the watched steps (the primary one), and the backward call that ended the step
    running now where no optimizer has stepped yet."""

    def __init__(self) -> None:
        self.primary: int | None = None
        """id() of the primary optimizer (None: none has stepped; steps are delimited by backward calls)."""
        self._primary_ref: weakref.ref[torch.optim.Optimizer] | None = None
        self._rival: tuple[int, int] | None = None
        """(id, steps seen) at the last step of an optimizer other than the primary one."""
        self.changes = 0
        """Times another optimizer took over delimiting the steps (the primary one gone, or stopped)."""
        self.by_optimizer = False
        """Steps are delimited by an optimizer's steps (else by backward calls): one has become the primary."""
        self.pending = False
        """Without an optimizer, a backward call ended the step running now: it closes at the next forward or
        backward, or as the watch stops (`take`)."""
        self.notes: list[str] = []

    def optimizer_stepped(self, optimizer: torch.optim.Optimizer, seen: int) -> Edge:
        """An optimizer other than the primary one stepped (`seen` steps so far). The primary one is the first one
        seen, until it is gone (a script that builds a new optimizer every step or every stage drops the old one) or
        another one steps twice with no step of it in between (a second stage's optimizer, the old one kept; a critic
        stepped five times per generator step); that one delimits them from then on."""
        if self.primary is None:
            self._make_primary(optimizer)
            return Edge.FIRST
        gone = self._primary_ref is not None and self._primary_ref() is None
        mark = (id(optimizer), seen)
        if gone or self._rival == mark:
            self._make_primary(optimizer)
            self.changes += 1
            return Edge.ENDS
        self._rival = mark
        return Edge.INSIDE

    def _make_primary(self, optimizer: torch.optim.Optimizer) -> None:
        self.primary = id(optimizer)
        self.by_optimizer = True
        try:
            self._primary_ref = weakref.ref(optimizer)
        except TypeError:  # a class with __slots__ and no __weakref__: known gone only by the other rule
            self._primary_ref = None
        self._rival = None

    def backwards_before(self, seen: int) -> int:
        """The first optimizer step is ending: the backward calls that delimited the `seen` steps until now (the last
        one's step had not ended). Where there were any, they were the first step's own (micro-batches accumulated
        before the first `optimizer.step()`, or several losses of one step, as a GAN's discriminator takes on real
        and fake samples), or a stretch of the script before its training loop, not training steps: said in the
        notes."""
        backwards = seen + self.pending
        self.pending = False
        if seen:
            self.notes.append(f"the first optimizer step came after {backwards} backward calls (the first step's own "
                              "passes, or losses): measured from that step on, steps ending at optimizer steps")
        return backwards

    def mark(self) -> None:
        """Without an optimizer, an outermost backward returned: it ends the step running now - known only once the
        next forward (or backward) starts without an optimizer step in between, or the watch stops."""
        self.pending = True

    def take(self) -> bool:
        """Whether a backward's boundary is pending (the step it ended must end now, as a forward or backward starts or
        the watch stops); it is taken."""
        pending = self.pending
        self.pending = False
        return pending
