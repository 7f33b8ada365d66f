"""JSON renderings: plain values only, NaN becomes null."""

from __future__ import annotations

import json
import math

from trainspeed.demo.result import DemoResult, DemoRun
from trainspeed.report.json import demo_dict, dumps


def test_demo_dict_keys_and_nan_to_null() -> None:
    run = DemoRun(device="cpu", variant="seed", epochs=10, seconds=1.0, us_per_epoch=1e5, syncs=10,
                  syncs_by_op={"item": 10}, final_loss=math.nan, test_accuracy=0.9,
                  chunk_seconds=[0.1] * 10, losses=[1.0] * 10, recorded_epochs=list(range(1, 11)), log_lines=[])
    result = DemoResult(epochs=10, devices=["cpu"], runs=[run], explanation=["a", "b"], torch_threads=1)
    data = json.loads(dumps(demo_dict(result)))
    assert data["schema"] == "trainspeed.demo/1"
    assert data["runs"][0]["final_loss"] is None and data["runs"][0]["records"] == 10
    assert data["explanation"] == "a\nb"
