"""Where a watched run's time went, by line: the host reads of tensors' values, the stack samples of "other" and of the
data waits, and the training framework's functions (the reads' and the sampler's parts of the result)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SyncSite:
    """A place in the user's code that read tensor values on the host: device tensors (`sync_sites`, each read a
    synchronisation) or CPU tensors (`host_read_sites`)."""

    where: str
    op: str
    count: int
    total_ms: float
    code: str = ""
    """The source text of that line ("" if unavailable)."""


@dataclass(frozen=True)
class OtherSite:
    """A source line where the step spent time outside every named phase (stack samples)."""

    where: str
    code: str
    samples: int
    share_of_other: float
    inside: str | None = None
    """The library most of this line's samples ran in, under the line ("torch.distributions", "numpy"), where
    at least half of them did; None: the line's own code, or C code it called."""


WORKER_WAIT = "waiting on the worker processes' batches"
"""`DataSite.machinery` of the training process's wait for batches its DataLoader's workers make."""


@dataclass(frozen=True)
class DataSite:
    """What the DataLoader was running while the script waited on it (stack samples of the training process):
    a line of the user's code it called (`where` is file:line: a transform, a Dataset's `__getitem__`, a
    collate_fn), a function of another package ("PIL/Image.py:resize"), or its own code
    ("torch/utils/data/_utils/collate.py:collate"; `machinery` says what that does)."""

    where: str
    code: str
    """The source text of a user's line ("" for a package's function)."""
    samples: int
    share_of_data: float
    """Of the samples taken while waiting on data that name a site."""
    inside: str | None = None
    """The library most of this site's samples ran in, where at least half did (None: its own code)."""
    machinery: str | None = None
    """For the DataLoader's own code, what it does ("collating samples into a batch", "waiting on the worker
    processes' batches"); None for the user's code and other packages."""


@dataclass(frozen=True)
class FrameworkSite:
    """A training framework's function where time outside every named phase went: the innermost frame of the
    framework in the stack samples ("lightning/pytorch/callbacks/progress/tqdm_progress.py:on_train_batch_end")."""

    function: str
    samples: int
    share_of_other: float


@dataclass(frozen=True)
class Reads:
    """The host-read tracker's part: the places that read tensors' values, the most time first."""

    sync_sites: list[SyncSite] = field(default_factory=list)
    """Reads of device tensors: each a synchronisation."""
    host_read_sites: list[SyncSite] = field(default_factory=list)
    """Reads of CPU tensors: no wait."""


@dataclass(frozen=True)
class Sites:
    """The stack sampler's part: where the time outside the named phases went, and what the DataLoader ran."""

    other: list[OtherSite] = field(default_factory=list)
    """Source lines the time in "other" went to, the most first."""
    loop: list[OtherSite] = field(default_factory=list)
    """The training loop's own lines (of the user's functions on the stack at a step's end) that the samples in
    "other" ran under, most first: a line's own time and that of every function it called (a data generator,
    a metric helper), where `other` splits a called function's time over its lines."""
    framework: list[FrameworkSite] = field(default_factory=list)
    """The training framework's own functions the time in "other" went to (its loop, callbacks, logging, progress
    bar), the most first."""
    data: list[DataSite] = field(default_factory=list)
    """What the DataLoader ran while the script waited on it, the most samples first (with workers, the training
    process mostly waits on them: `machinery` says so)."""
    workers: list[DataSite] = field(default_factory=list)
    """What the DataLoader's worker processes ran while they made batches, from their own stack samples (forked
    workers; `share_of_data` is of those samples)."""
