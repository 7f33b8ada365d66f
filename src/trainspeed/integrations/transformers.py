"""`TrainspeedCallback` for Hugging Face's Trainer: `Trainer(..., callbacks=[TrainspeedCallback(json="doctor.json")])`.

A `TrainerCallback` that watches from `on_train_begin` to `on_train_end` and then writes the doctor's report: the
terminal summary (stderr), `json` (the same object as `trainspeed doctor --json`), `html`, or a new folder under
`out`. Watching does not change the run's losses, and an error of trainspeed's is reported once and watching
stops; the training goes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainspeed.integrations.session import CallbackSession

try:
    from transformers import TrainerCallback
except ImportError as e:
    raise ImportError("trainspeed.integrations.transformers needs transformers: "
                      "pip install 'trainspeed[transformers]'") from e


class TrainspeedCallback(TrainerCallback):
    def __init__(self, json: str | Path | None = None, html: str | Path | None = None, out: str | Path | None = None,
                 warmup: int | None = None, summary: bool = True, window: tuple[int, int] | str | None = None) -> None:
        self.session = CallbackSession(json=json, html=html, out=out, warmup=warmup, summary=summary, window=window)

    @property
    def report(self) -> Any:
        """The doctor's report once training ended (a DoctorReport), else None."""
        return self.session.report

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if getattr(state, "is_world_process_zero", True):
            self.session.begin()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.session.end()
