"""The doctor's report object and its judging: what the summary says of a judged run."""

from __future__ import annotations

import dataclasses

import torch
from recorded_runs import rendered
from torch import nn

from trainspeed.report.html import doctor_html


def test_callable_package_and_html() -> None:
    import trainspeed
    import trainspeed.watch.syncs as syncs_module  # the package stays importable as a package

    assert callable(trainspeed.watch) and syncs_module.SyncCounter
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with trainspeed.watch(warmup=1, profile_steps=1) as w:
        for _ in range(10):
            loss = model(torch.randn(8, 4)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    report = w.result()
    html = doctor_html(report)
    assert "<h1>trainspeed doctor</h1>" in html and "forward" in html
    assert report.watch.steps.seen == 10 and report.context.dispatch_us > 0 and report.context.matmul_gflops > 0


def test_a_cuda_report_says_what_device_ms_is_and_how_much_the_gpu_works() -> None:
    from recorded_runs import recorded

    from trainspeed.hardware import detect_hardware
    from trainspeed.measure import diagnose_run

    # the detailed steps' medians add up to more than the median step, as on a real tiny step; the shares, from
    # sums, add up to 1
    r = recorded(1.2, {"forward": 0.43, "backward": 0.67, "optimizer": 0.25}, {"forward": 0.42, "backward": 0.66},
                 dev="cuda", ops=28, kernels=21, flops=40800, busy=0.055,
                 shares={"forward": 0.3, "backward": 0.47, "optimizer": 0.18})
    report = diagnose_run(r, hardware=detect_hardware(), dispatch_us=1.4, matmul_gflops=700, launch_us=14.5)
    text = rendered(report)
    assert "the GPU works 0.055 ms of the step, 5%" in text and "idle gaps included" in text
    page = doctor_html(report)
    assert "the GPU works 0.055 ms of the step, 5%" in page and "14.50 us on CUDA" in page
    assert [v.id for v in report.verdicts][:2] == ["launch_bound", "cpu_faster"]


def test_a_prediction_at_the_models_cap_is_shown_as_a_floor() -> None:
    import dataclasses

    from recorded_runs import recorded

    from trainspeed.diagnose.rules import MAX_PREDICTED, predicted_label
    from trainspeed.diagnose.verdict import Verdict
    from trainspeed.hardware import detect_hardware
    from trainspeed.measure import diagnose_run

    assert predicted_label(2.214) == "predicted 2.21x"
    assert predicted_label(MAX_PREDICTED) == "predicted at least 10x (no prediction goes past 10x)"
    r = recorded(40.0, {"forward": 8.0, "backward": 30.0, "optimizer": 1.5}, ops=100, flops=170e6)
    report = diagnose_run(r, hardware=detect_hardware(), dispatch_us=2.0, matmul_gflops=100.0)
    capped = dataclasses.replace(report, verdicts=[Verdict("slow_dtype", "e", "a", MAX_PREDICTED),
                                                   Verdict("small_batch", "e", "a", 1.5)])
    text = rendered(capped)
    assert "1. slow_dtype - predicted at least 10x" in text and "2. small_batch - predicted 1.50x" in text
    page = doctor_html(capped)
    assert "predicted at least 10x" in page and "predicted 1.50x" in page


def test_the_summary_lists_what_the_dataloader_ran_only_where_the_wait_is_worth_it() -> None:
    from recorded_runs import recorded

    from trainspeed.hardware import detect_hardware
    from trainspeed.measure import diagnose_run
    from trainspeed.watch.result import LoaderInfo
    from trainspeed.watch.sites import DataSite

    sites = [DataSite("train.py:12", "image = resize(image)", 30, 0.6),
             DataSite("torch/utils/data/_utils/collate.py:collate", "", 20, 0.4,
                      machinery="collating samples into a batch")]

    def views(data_ms: float) -> tuple[str, str]:
        r = recorded(20.0, {"data": data_ms, "forward": 8.0, "backward": 8.0, "optimizer": 1.0}, flops=2e8, batch=64,
                     loaders=[LoaderInfo(0, False, 64, False)])
        report = diagnose_run(dataclasses.replace(r, sites=dataclasses.replace(r.sites, data=sites)),
                              hardware=detect_hardware(), dispatch_us=2.0,
                              matmul_gflops=100.0)
        return rendered(report), doctor_html(report)

    text, page = views(3.0)
    assert "data wait in train.py:12 (60% of 50 samples): image = resize(image)" in text
    assert "data wait in torch/utils/data/_utils/collate.py:collate (40% of 50 samples) (collating samples" in text
    text, page = views(0.2)  # 1% of the run: not worth the summary's lines, still in the HTML report
    assert "data wait in" not in text and "Waiting on the DataLoader, by what it ran" in page
    assert "<code>image = resize(image)</code>" in page and "collating samples into a batch" in page


def test_the_summary_says_the_recompute_the_compiles_and_what_the_workers_ran() -> None:
    from recorded_runs import recorded

    import trainspeed.measure as report_module
    from trainspeed.hardware import detect_hardware
    from trainspeed.watch.result import Compiles, LoaderInfo, WorkerCpu

    r = recorded(30.0, {"data": 10.0, "forward": 5.0, "backward": 12.0, "optimizer": 2.0}, ops=100, flops=1e8,
                 loaders=[LoaderInfo(1, False, 32, False, batches=120)])
    r = dataclasses.replace(r, steps=dataclasses.replace(r.steps, recompute_ms_per_step=4.25),
                            machine=dataclasses.replace(r.machine, loader_workers=WorkerCpu(94, 9.5),
                                                        compiles=Compiles(2, 0.5)))
    text = rendered(report_module.diagnose_run(r, hardware=detect_hardware(), dispatch_us=2.0, matmul_gflops=100.0))
    assert "backward recomputes checkpointed forwards (activation checkpointing): 4.25 ms per step" in text
    assert "DataLoader worker processes: 94 batches while measured, 9.50 ms of CPU each" in text
    assert "torch.compile: 2 graph(s) compiled while the steps were measured, 0.50 s" in text


def test_a_prediction_for_the_loop_is_also_said_for_the_whole_process() -> None:
    """The script a user times is its start-up, its set-up, the loop and what follows: a loop 2.26x faster is a
    process 1.35x faster where the loop took 1.8 s of 4.3 s (examples/realistic/sequence_cells.py, 2026-11-27,
    measured 1.30x by the whole process). The rest is held as it was."""
    from recorded_runs import CTX, recorded

    from trainspeed.diagnose.report import DoctorReport
    from trainspeed.diagnose.verdict import Verdict
    from trainspeed.hardware import detect_hardware
    from trainspeed.report.doctor_text import prediction_words, process_line

    r = recorded(5.0, {"forward": 2.0, "backward": 2.5})
    r = dataclasses.replace(r, steps=dataclasses.replace(r.steps, loop_s=1.8))
    verdict = Verdict("launch_bound", "e", "a", 2.26)
    report = DoctorReport(detect_hardware(), r, [verdict, Verdict("small_batch", "e", "a", None)], CTX, process_s=4.3)
    assert report.process_speedup(verdict) == round(4.3 / (4.3 - 1.8 + 1.8 / 2.26), 2) == 1.3
    assert report.process_speedup(report.verdicts[1]) is None
    assert prediction_words(report, verdict) == "predicted 2.26x (1.30x on the whole process)"
    assert process_line(report) == ("the training loop took 1.8 s of the script's 4.3 s; the rest (2.5 s: start-up, "
                                    "set-up, what follows the loop) is held as it was in each whole-process prediction")
    # from the Python API (no process timed), or a loop longer than the process (a clock of its own): the loop's alone
    for odd in (dataclasses.replace(report, process_s=None), dataclasses.replace(report, process_s=1.0)):
        assert odd.process_speedup(verdict) is None and prediction_words(odd, verdict) == "predicted 2.26x"
    assert "on the whole process" in rendered(report)
