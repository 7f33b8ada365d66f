"""`TrainspeedCallback` for PyTorch Lightning: `Trainer(callbacks=[TrainspeedCallback(json="doctor.json")])`.

It watches from the start of training (after the sanity check) to its end (or, with `window=(50, 150)`, those steps
only, the report written as the window closes and the training going on unwatched), and then writes the doctor's report:
the terminal summary (stderr), `json` (the same object as `trainspeed doctor --json`), `html`, or a new folder
under `out`. Watching does not change the run's losses, and an error of trainspeed's is reported once and
watching stops; the training goes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainspeed.integrations.session import CallbackSession

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older package name
    try:
        from pytorch_lightning.callbacks import Callback  # type: ignore[assignment]
    except ImportError as e:
        raise ImportError("trainspeed.integrations.lightning needs Lightning: pip install 'trainspeed[lightning]'") from e


class TrainspeedCallback(Callback):
    def __init__(self, json: str | Path | None = None, html: str | Path | None = None, out: str | Path | None = None,
                 warmup: int | None = None, summary: bool = True, window: tuple[int, int] | str | None = None) -> None:
        super().__init__()
        self.session = CallbackSession(json=json, html=html, out=out, warmup=warmup, summary=summary, window=window)

    @property
    def report(self) -> Any:
        """The doctor's report once training ended (a DoctorReport), else None."""
        return self.session.report

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if getattr(trainer, "global_rank", 0) == 0:
            self.session.begin()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.session.end()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.session.abandon()
