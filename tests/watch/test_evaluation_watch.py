"""Evaluations seen in a watched run: model.eval() spans, no_grad spans, and what is not one."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import nn

from trainspeed.watch import Watcher
from trainspeed.watch.result import WatchResult


def _small_mlp() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    """An MLP of 8 -> 16 -> 2, its SGD and a batch of 32 (seeded)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    return model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(32, 8), torch.randint(0, 2, (32,))


def _evaluating_loop(steps: int, every: int, frozen_norm: bool = False, eval_mode: bool = True) -> None:
    """A small model trained on fixed data, evaluated (model.eval() ... model.train()) every `every` steps; with
    `frozen_norm`, trained in eval mode throughout (batch norm frozen, as fine-tuning does); without `eval_mode`,
    evaluated under torch.no_grad() alone, in training mode."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 8), torch.randint(0, 2, (32,))
    if frozen_norm:
        model.eval()
    for step in range(steps):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)  # a no_grad span every step, with no model call
        if not frozen_norm and step % every == every - 1:
            model.train(not eval_mode)
            with torch.no_grad():
                for _ in range(20):
                    model(x)
                    time.sleep(0.0005)
            model.train()
    model.eval()  # a final evaluation with no train() after it: not one of the run's


def _trained_evaluating(steps: int, every: int, evaluate: Callable[[nn.Module, torch.Tensor], None],
                        warmup: int) -> WatchResult:
    """`_small_mlp` trained `steps` steps, watched, evaluated by `evaluate` (in eval mode, under no_grad) after every
    `every`-th step."""
    model, optimizer, x, y = _small_mlp()
    with Watcher(warmup=warmup, profile_steps=0) as w:
        for step in range(steps):
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % every == every - 1:
                model.eval()
                with torch.no_grad():
                    evaluate(model, x)
                model.train()
    return w.measurements()


def test_evaluations_between_steps_are_counted_with_their_share_of_the_run() -> None:
    with Watcher(warmup=3, profile_steps=0) as w:
        _evaluating_loop(60, 10)
    ev = w.measurements().evaluation
    # those ending after steps 10, 20, ... 60: the measured steps start after the 3 warm-up steps
    assert ev is not None and ev.count == ev.in_run == 6 and ev.every_steps == 10
    assert ev.mean_ms >= 20 * 0.5 and 0.2 < ev.share < 1.0  # 20 sleeps of 0.5 ms against 10 tiny steps


def test_a_run_that_mostly_evaluates_has_a_share_under_all_of_it() -> None:
    """Validation every 4 tiny steps, the last after the final step (as Lightning validates at the end of fit):
    that last one lies in no step's time, so the share counts it beside the steps' time, not against it alone
    (a Lightning run spending 95% of fit() validating read as 100%). What the evaluations add to the mean step
    leaves the last one out."""
    def evaluate(model: nn.Module, x: torch.Tensor) -> None:
        model(x)
        time.sleep(0.1)

    r = _trained_evaluating(12, 4, evaluate, warmup=3)
    ev = r.evaluation
    assert ev is not None and ev.count == 3 and ev.mean_ms >= 100
    # 300 ms of evaluation against 9 measured steps holding 200 ms of it: under all of the run, whatever the steps took
    assert 0.5 < ev.share < 0.99
    inside = 2 * ev.mean_ms  # after steps 4 and 8, within the measured steps that follow them; step 12's is after
    assert abs(ev.step_ms * r.steps.measured - inside) < 0.1 * inside
    assert r.steps.mean_ms is not None and ev.step_ms < r.steps.mean_ms


def test_an_evaluation_under_no_grad_alone_is_counted_and_said_so() -> None:
    with Watcher(warmup=3, profile_steps=0) as w:
        _evaluating_loop(60, 10, eval_mode=False)
    ev = w.measurements().evaluation
    assert ev is not None and ev.by == "no_grad" and ev.count == 6 and ev.every_steps == 10
    assert ev.mean_ms >= 20 * 0.5 and 0.2 < ev.share < 1.0
    with Watcher(warmup=3, profile_steps=0) as w:
        _evaluating_loop(60, 10)
    assert w.measurements().evaluation.by == "model.eval()"  # not counted twice inside model.eval()'s span


def test_the_model_under_no_grad_on_every_step_is_the_steps_work_not_an_evaluation() -> None:
    # a GAN's generator run under no_grad for the critic's step, an agent choosing its action: every step
    model, optimizer, x, y = _small_mlp()
    with Watcher(warmup=3, profile_steps=0) as w:
        for _ in range(40):
            with torch.inference_mode():
                target = model(x).argmax(1)
            loss = nn.functional.cross_entropy(model(x), (target + y) % 2)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert w.measurements().evaluation is None


def test_a_model_trained_in_eval_mode_is_not_an_evaluation() -> None:
    with Watcher(warmup=3, profile_steps=0) as w:
        _evaluating_loop(30, 10, frozen_norm=True)
    assert w.measurements().evaluation is None


def _gpt_style_loop(steps: int, every: int, splits: int = 2) -> None:
    """Evaluation as char-level GPT scripts write it: `@torch.no_grad()` around a function that calls
    model.eval(), evaluates each split, then model.train(); every `every` steps, the first at step 0."""
    model, optimizer, x, y = _small_mlp()

    @torch.no_grad()
    def estimate_loss() -> list[float]:
        model.eval()
        out = []
        for _ in range(splits):
            losses = []
            for _ in range(5):
                losses.append(nn.functional.cross_entropy(model(x), y).item())
                time.sleep(0.0005)
            out.append(sum(losses) / len(losses))
        model.train()
        return out

    for step in range(steps):
        if step % every == 0:
            estimate_loss()
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_an_evaluation_under_no_grad_that_calls_eval_is_one_evaluation() -> None:
    with Watcher(warmup=2, profile_steps=0) as w:
        _gpt_style_loop(101, every=10)
    ev = w.measurements().evaluation
    # evaluations at steps 0, 10, ..., 100: 11 in the run, as the script counts them; those after the 2 warm-up
    # steps are measured (timed): 10 of them
    assert ev is not None and ev.in_run == 11 and ev.count == 10 and ev.every_steps == 10 and ev.by == "model.eval()"
    assert ev.share < 0.9  # the nested no_grad span is not counted again


def test_back_to_back_no_grad_blocks_with_no_step_between_are_one_evaluation() -> None:
    model, optimizer, x, y = _small_mlp()
    with Watcher(warmup=2, profile_steps=0) as w:
        for step in range(60):
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 20 == 19:
                for _ in range(3):  # one block per split
                    with torch.no_grad():
                        model(x)
                        time.sleep(0.002)
    ev = w.measurements().evaluation
    assert ev is not None and ev.count == 3 and ev.every_steps == 20 and ev.by == "no_grad"
    assert ev.mean_ms >= 6.0  # the three blocks' time, together


def test_a_last_evaluation_after_the_last_step_counts_in_the_run_untimed() -> None:
    # an epoch loop that evaluates at each epoch's end, the last with no train() after it: the script evaluated
    # 3 times; a final model.eval() that calls nothing (before saving, say) is no evaluation
    model, optimizer, x, y = _small_mlp()
    with Watcher(warmup=2, profile_steps=0) as w:
        for _ in range(3):
            model.train()
            for _ in range(10):
                loss = nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            model.eval()
            with torch.no_grad():
                model(x)
    ev = w.measurements().evaluation
    assert ev is not None and ev.in_run == 3 and ev.count == 2 and ev.every_steps == 10
    assert torch.nn.modules.module._global_forward_pre_hooks == {}  # nothing left behind


def test_an_evaluation_s_batches_and_lines_are_not_the_training_step_s() -> None:
    """Validation batches are the evaluation's time, not the training steps' wait on data (the data share of an
    accelerate script counted its validation loader's batches, which evaluation_heavy counted again); the lines
    of a validation loop are not the training step's "other" (Lightning's `self.log("val_loss", ...)` was blamed
    for training time)."""
    from torch.utils.data import DataLoader, Dataset

    class SlowItems(Dataset):  # 2 ms an item: a validation set read from disk
        def __len__(self) -> int:
            return 16

        def __getitem__(self, i: int) -> torch.Tensor:
            time.sleep(0.002)
            return torch.full((8,), float(i))

    val = DataLoader(SlowItems(), batch_size=4)

    def evaluate(model: nn.Module, x: torch.Tensor) -> None:
        for batch in val:
            model(batch)
            time.sleep(0.01)  # the validation loop's own line

    r = _trained_evaluating(30, 10, evaluate, warmup=2)
    assert r.evaluation is not None and r.evaluation.count == 3
    assert r.phases["data"].share < 0.05 and r.loaders.starts == 0
    assert not any("the validation loop's own line" in s.code for s in (*r.sites.other, *r.sites.loop))


def test_an_evaluation_after_a_hand_written_update_ends_the_step_before_it() -> None:
    """Without an optimizer a backward ends the step once the next forward starts; a `model.eval()` after it (a
    language model's `evaluate()` after each epoch, its SGD update written by hand) ends the step first, so the
    evaluation's forwards are the evaluation's, not the start of a step: each counted."""
    model, _, x, y = _small_mlp()
    steps, every = 40, 10
    with Watcher(warmup=3, profile_steps=0) as w:
        for step in range(steps):
            model.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-0.1)
            if step % every == every - 1:
                model.eval()
                with torch.no_grad():
                    for _ in range(5):
                        model(x)
                        time.sleep(0.0005)
                model.train()
    r = w.measurements()
    ev = r.evaluation
    assert r.steps.seen == steps
    # the last evaluation ends the run with no step after it: the run's, counted untimed
    assert ev is not None and ev.in_run == steps // every and ev.every_steps == every and ev.by == "model.eval()"
