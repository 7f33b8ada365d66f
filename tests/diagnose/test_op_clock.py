"""The window's op times on their phase's clock: a phase's ops, timed one call at a time, never listed as more than
the phase."""

from __future__ import annotations

import dataclasses
import json

from tests.diagnose.recorded_runs import CTX, recorded, rendered
from trainspeed.diagnose.op_clock import on_phase_clock, outgrown, phase_ops
from trainspeed.diagnose.report import DoctorReport
from trainspeed.diagnose.rules import diagnose
from trainspeed.hardware import detect_hardware
from trainspeed.report.json import doctor_dict
from trainspeed.watch.op_counter import calls_by_phase
from trainspeed.watch.result import OpTime


def _sequence_run():
    """A step of many small ops (a recurrent cell stepped in Python): the window timed the backward's 1,000 calls at
    13.0 ms, in a backward of 7.0 ms; the forward's 400 calls at 3.0 ms of its 5.0 ms."""
    rows = [OpTime("aten.mm", "float32", 73, 2.7, True, 5.5e7, "backward"),
            OpTime("aten.t", "float32", 220, 1.1, False, None, "backward"),
            OpTime("aten.mul", "float32", 707, 9.2, False, None, "backward"),
            OpTime("aten.addmm", "float32", 49, 2.3, True, 3.1e7, "forward"),
            OpTime("aten.sigmoid_", "float32", 351, 0.7, False, None, "forward")]
    r = recorded(13.0, {"forward": 5.0, "backward": 7.0, "optimizer": 0.5}, ops=1400)
    window = dataclasses.replace(r.window, op_times=rows, op_ms_per_step=sum(o.ms for o in rows),
                                 op_calls_by_phase=calls_by_phase(rows))
    return dataclasses.replace(r, window=window), rows


def test_a_phase_whose_ops_outgrow_it_shares_the_excess_over_their_calls() -> None:
    r, rows = _sequence_run()
    back = phase_ops(r, "backward")
    assert back is not None and back.calls == 1000 and round(back.ops_ms, 6) == 13.0 and back.phase_ms == 7.0
    # (13.0 - 7.0) ms over 1,000 calls is 6 us a call, more than aten.t's 5: t reads 0, and the 4.9 ms left over
    # the other 780 calls make 6.282 us a call
    assert round(back.excess_us, 3) == 6.282
    assert phase_ops(r, "forward").excess_us == 0.0  # 3.0 ms of ops in a 5.0 ms forward: as timed
    assert [o.phase for o in outgrown(r, ("forward", "backward", "optimizer"))] == ["backward"]
    mm, t, mul, addmm, _ = rows
    assert round(on_phase_clock(r, mm), 6) == round(2.7 - 73 * back.excess_us / 1e3, 6)  # each call 6.3 us less
    assert on_phase_clock(r, t) == 0.0  # 5 us a call: what cannot run faster than the excess reads 0
    assert on_phase_clock(r, addmm) == 2.3  # the forward's ops fit in it
    listed = sum(on_phase_clock(r, o) for o in rows if o.phase == "backward")
    assert round(listed, 9) == back.phase_ms < sum(o.ms for o in rows if o.phase == "backward")


def test_the_report_says_which_figure_is_wrong_and_lists_the_ops_on_their_phase_clock() -> None:
    r, _ = _sequence_run()
    report = DoctorReport(detect_hardware(), r, diagnose(r, CTX), CTX)
    text = " ".join(rendered(report).split())
    assert "the backward's ops came to 13.000 ms a step, more than the backward's 7.000 ms" in text
    assert "each of their 1,000 calls is 6.3 us less" in text
    assert "op aten.mm (float32) x73: 2.241 ms per step" in text  # 2.7 ms less 73 calls of 6.282 us
    assert "the forward's ops came to" not in text
    data = json.loads(json.dumps(doctor_dict(report)))
    assert round(data["per_step"]["ops_by_phase"]["backward"]["excess_us"], 3) == 6.282
    assert data["per_step"]["ops_by_phase"]["forward"]["excess_us"] == 0.0
