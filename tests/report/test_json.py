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


def test_sweep_json_keeps_the_contract_keys() -> None:
    from trainspeed.report.json import sweep_dict
    from trainspeed.sweep.result import SweepPoint, SweepResult

    r = SweepResult("record-every", "iris", "cpu", 100, 5,
                    [SweepPoint("1", 1.0, 0.9, 1.1, True, trials=5, extras={"records": 100}),
                     SweepPoint("2", None, None, None, False, "out of memory: x", 1)],
                    findings={"fit": {"a": 1.0, "b": 0.001, "r2": 0.99}}, recommendation="r", best="1")
    d = sweep_dict(r)
    assert d["schema"] == "trainspeed.sweep/1" and d["knob"] == "record-every" and d["workload"] == "iris"
    assert d["points"][0] == {"value": "1", "median_s": 1.0, "ci_low": 0.9, "ci_high": 1.1, "ok": True,
                              "error": None, "trials": 5, "predicted": False, "records": 100}
    assert d["points"][1]["ok"] is False and d["points"][1]["error"] == "out of memory: x"
    assert d["fit"] == {"a": 1.0, "b": 0.001, "r2": 0.99}
