"""When each step of a watched run is watched how: the warm-up, the profiler window, the detailed steps and the quiet
ones, and --steps' end.

`StepSchedule` counts the steps and decides, step by step, what the next ones are: detailed (every module call,
backward and optimizer step timed) or edges-only, quiet (their end only counts them) or kept. It changes nothing
itself: the watcher applies each decision (the hooks in or out, the clock's detail mode).
"""

from __future__ import annotations

import random

from trainspeed.watch.patching import resumes_left

DETAILED_FIRST = 50
"""Measured steps that are all detailed before sampling starts."""

DETAIL_BLOCK = 64
"""Detailed steps come in runs of this many: switching the per-call hooks in or out costs about 0.2 ms each way (setting
or deleting attributes of nn.Module and the optimizer classes modifies every subclass, and the step after it
re-specialises the call sites that touched them: BENCHMARKS.md, "Where the code's constants come from"), so it must be
rare."""

SWITCHES_PER_DOUBLING = 32
"""After every this many detailed runs, the runs (and the gaps between them) grow twice as long: the
share of detailed steps stays one in `detail_every`, while the hook switches, which modify
torch.nn.Module's class (see patching.RESUME_BUDGET), grow only with the logarithm of the run's length."""

WARMUP = 3
"""Warm-up steps where the user names none (`--warmup`)."""

LONG_STEP_S = 1.0
"""A first step whose forward, backward and optimizer take this long on a CPU (an LBFGS step's closure evaluations, a
large model) makes a run of few long steps: where the user named no warm-up, one warm-up step and one profiled step (a
step of a second holds thousands of ops to count), so that a run of three such steps still has a measured one. Not
the step's whole time, which holds the script's setup before the loop, nor on CUDA, whose first step holds the
device's start."""

QUIET_MAX = 64
"""A quiet run lasts at most this many steps: the step after it adds the run's data, h2d, sync and
checkpoint seconds to the clock's sums, and a run the script ends inside is left out of them."""


class StopWatching(BaseException):
    """Raised from a hook when the requested number of steps is reached (BaseException, so a
    script's `except Exception` does not swallow it)."""


class StepSchedule:
    """The step count and what each step is: warm-up, under the profiler window, measured; detailed or edges-only;
    quiet or kept."""

    def __init__(self, warmup: int | None, max_steps: int | None, profile_steps: int, detail_every: int) -> None:
        self.warmup = WARMUP if warmup is None else warmup
        self.max_steps, self.detail_every = max_steps, detail_every
        self._shortens = warmup is None
        """The warm-up and the window are the defaults: a long first step shortens them (`long_first`)."""
        self.profile_steps = profile_steps
        self.detailed = True
        """Whether the step running now is detailed. After the first DETAILED_FIRST measured steps, about one
        step in `detail_every` is detailed (every module call, backward and zero_grad timed): runs of
        DETAIL_BLOCK detailed steps separated by runs of edges-only steps of random length, so that no periodic
        pattern of the loop lines up with them. detail_every=1: every step detailed."""
        self._rng = random.Random(7)
        self.quiet_until = 0
        """Steps with a lower index are quiet: their end only counts them, and their host reads go only
        to the tally of their line (so does the step that ends the quiet run, passed over too). 0: none."""
        self._quiet_from = 0
        self.cuda = False
        """The run is on a CUDA device (`on_cuda`)."""
        self.notes: list[str] = []
        self.every = 0
        """Every this many steps an interim report is made (`--report-every`; 0: none)."""
        self.restart()

    def restart(self) -> None:
        """Count from the first step again: the warm-up, the profiler window and the detail runs start over (the
        first optimizer step came after backward-delimited steps)."""
        self.opens_at = max(self.warmup, 1)
        """The first step the profiler window profiles: the first after the warm-up (never step 0)."""
        self.settled_at = self.opens_at + self.profile_steps if self.profile_steps > 0 else self.warmup
        """The first step that is neither warm-up nor under the window: the measured steps start there."""
        self.seen = 0
        self._mode_left = 0
        self._detail_runs = 0

    def long_first(self, compute_s: float) -> bool:
        """The first step's forward, backward and optimizer took `compute_s`: where that is LONG_STEP_S or more on a
        CPU and the user named no warm-up, one warm-up step and at most one profiled step from now on (said in the
        notes); whether the schedule changed."""
        if not self._shortens or self.seen != 1 or self.cuda or compute_s < LONG_STEP_S:
            return False
        self._shortens = False
        self.warmup, self.profile_steps = 1, min(self.profile_steps, 1)
        self.opens_at = 1
        self.settled_at = 1 + self.profile_steps
        self.notes.append(f"the first step's forward, backward and optimizer took {compute_s:.1f} s: one warm-up step and "
                          f"{'one under the profiler window' if self.profile_steps else 'no profiler window'}, the "
                          f"steps from step {self.settled_at} measured (a run of few long steps)")
        return True

    def step(self) -> int:
        """A step ended: counted; its index."""
        index = self.seen
        self.seen = index + 1
        return index

    def on_cuda(self) -> None:
        self.cuda = True

    def woke(self) -> bool:
        """Whether a quiet run ended with the step ending now (its clock started with the run's: passed over too)."""
        return self.quiet_until != 0

    def quiet_steps(self, upto: int) -> int:
        """The quiet steps ended before step `upto` (at the step that ends the quiet run, or as the watch stops), for
        the samples to pass over; the run is over (0 where there was none)."""
        if not self.quiet_until:
            return 0
        quiet = upto - self._quiet_from
        self._mode_left -= quiet
        self.quiet_until = 0
        return quiet

    def quiet_so_far(self) -> int:
        """Steps of the current quiet run ended so far (not yet counted into the samples)."""
        return self.seen - self._quiet_from if self.quiet_until else 0

    def go_quiet(self, index: int, passes: int) -> bool:
        """After step `index`, with `passes` steps in a row that no sample keeps: the steps from the next one that
        nothing will be asked of at their end - the samples pass over them, the detail mode stays, --steps is not
        reached - run quiet, up to QUIET_MAX of them. Whether a quiet run starts."""
        until = index + min(passes, self._mode_left, QUIET_MAX)
        if self.max_steps is not None:
            until = min(until, self.max_steps - 1)
        if self.every:  # the step an interim report follows is no quiet one
            until = min(until, (index // self.every + 1) * self.every - 1)
        if until <= index + 1:
            return False
        self.quiet_until, self._quiet_from = until, index + 1
        return True

    def next_mode(self, by_optimizer: bool, window_open: bool) -> bool | None:
        """The detail mode of the step that starts now, where it changes (None: it stays), and for how many steps.
        Every step is detailed through the warm-up, the profiler window and DETAILED_FIRST measured steps, while the
        steps are delimited by backward calls, and with detail_every=1; then runs of DETAIL_BLOCK detailed steps (and
        longer, every SWITCHES_PER_DOUBLING runs) between edges-only runs of random length, until the process has
        switched the per-call hooks as often as it may."""
        self._mode_left -= 1
        if self._mode_left > 0:
            return None
        early = self.warmup + self.profile_steps + DETAILED_FIRST - self.seen
        if early > 0 or window_open or not by_optimizer or self.detail_every <= 1:
            detailed = True
            self._mode_left = early if early > 0 and by_optimizer else 1
        else:
            detailed = not self.detailed
            if detailed and not resumes_left():
                detailed = False  # edges only from here on: see patching.RESUME_BUDGET
                self._mode_left = 1 << 62
                self.notes.append(f"detailed steps stopped at step {self.seen}: this process has switched the "
                                  "per-call hooks as often as it may (Python 3.13+ stops caching a class's attribute "
                                  "lookups after 1 000 changes); the forward/backward/optimizer split comes from the "
                                  "steps before")
            else:
                block = DETAIL_BLOCK << (self._detail_runs // SWITCHES_PER_DOUBLING)
                self._detail_runs += detailed
                gap = block * (self.detail_every - 1)
                self._mode_left = block if detailed else self._rng.randint(gap // 2, gap + gap // 2)
        if detailed == self.detailed:
            return None
        self.detailed = detailed
        return detailed

    def report_every(self, steps: int) -> None:
        """An interim report after every `steps` steps (once the measured steps have started)."""
        self.every = steps

    def due(self, index: int) -> bool:
        """Whether an interim report follows step `index`."""
        return bool(self.every) and index + 1 >= self.settled_at and (index + 1) % self.every == 0

    def stop_after(self, steps: int | None) -> None:
        """The watch ends after `steps` more steps (a window of steps opening now; None: at the run's end)."""
        self.max_steps = steps

    def reached(self) -> bool:
        """Whether --steps' count is reached."""
        return self.max_steps is not None and self.seen >= self.max_steps

    def last(self) -> None:
        """The watch stops: --steps no longer counts (the last step of a loop without an optimizer ends now)."""
        self.max_steps = None
