"""The demo's closing section: the doctor's verdicts on the seed's own loop, on each device."""

from __future__ import annotations

from trainspeed.demo.variants import make_loop
from trainspeed.diagnose.report import DoctorReport
from trainspeed.doctor import Doctor
from trainspeed.workloads.iris import load_iris_split, make_iris_mlp

DOCTOR_EPOCHS = 2000  # enough steps for stable medians, a second or two on a CPU


def doctor_on_seed(device: str, epochs: int = DOCTOR_EPOCHS) -> DoctorReport:
    """Watch the seed's loop (loss.item() every epoch, a print every 100) and judge it."""
    data = load_iris_split().to(device)
    model = make_iris_mlp(seed=0).to(device)
    loop = make_loop("seed", model, data.x_train, data.y_train, epochs)
    with Doctor() as watcher:
        loop.run(0, epochs)
    return watcher.result()
