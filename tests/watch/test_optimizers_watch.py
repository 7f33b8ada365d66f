"""Which optimizer delimits the watched steps, the passes within a step (micro-batches, closures, gradient penalties), and the optimizers built inside the loop."""

from __future__ import annotations

import torch
from torch import nn
from watched_loops import seed_loop, tiny_step

from trainspeed.watch import Watcher
from trainspeed.workloads import load_iris_split, make_iris_mlp


def _accumulating_loop(steps: int, micro: int) -> list[float]:
    """The Iris MLP trained on micro-batches of one sample, `micro` of them accumulated per optimizer step
    (as /tmp's unseen per-sample script did); returns each step's last loss."""
    d = load_iris_split()
    model = make_iris_mlp(seed=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    for step in range(steps):
        optimizer.zero_grad()
        for j in range(micro):
            k = (step * micro + j) % len(d.y_train)
            loss = nn.functional.cross_entropy(model(d.x_train[k:k + 1]), d.y_train[k:k + 1]) / micro
            loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_backward_calls_before_the_first_optimizer_step_are_its_micro_batches_not_steps() -> None:
    # the first optimizer step comes after 8 backward calls: until then steps were backward calls, and the
    # warm-up, the profiler window and the samples had been spent on micro-batches (91 "steps" of 60)
    plain = _accumulating_loop(40, 8)
    with Watcher(warmup=2, profile_steps=2) as w:
        watched = _accumulating_loop(40, 8)
    assert watched == plain
    r = w.measurements()
    assert r.steps.seen == 40 and r.steps.measured == 36
    assert r.steps.micro_batches_per_step == 8 and r.model.batch_size == 1
    assert r.window.ops_per_step is not None and r.window.ops_per_step > 8 * 10  # the window saw whole steps
    assert r.phases["backward"].host_ms > 4 * r.phases["optimizer"].host_ms
    assert any("after 8 backward calls" in note for note in r.notes)


def test_a_step_with_one_forward_and_backward_is_one_micro_batch() -> None:
    # a loss module is an outermost module call too, and a second optimizer's steps (a GAN's) share the passes
    with Watcher(warmup=1, profile_steps=0) as w:
        seed_loop(20)
    assert w.measurements().steps.micro_batches_per_step == 1 and w.measurements().steps.optimizer_steps_per_step == 1
    model, optimizer, x = tiny_step()
    other = torch.optim.SGD(model.parameters(), lr=0.0)
    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(20):
            model(x).sum().backward()
            optimizer.step()
            model(x).sum().backward()
            other.step()
    assert w.measurements().steps.micro_batches_per_step == 1 and w.measurements().steps.optimizer_steps_per_step == 2


def _rebuilding_loop(steps: int) -> list[float]:
    """A new Adam built at every step, inside the loop (as /tmp's unseen script did)."""
    torch.manual_seed(0)
    model, _, x = tiny_step()
    losses = []
    for _ in range(steps):
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        loss = model(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_a_new_optimizer_built_every_step_delimits_the_steps_and_is_counted() -> None:
    # the first optimizer is gone after its step: the next one delimits the steps (2 steps seen of 800 before,
    # where each new optimizer that did not reuse the first one's id stepped as a second optimizer)
    plain = _rebuilding_loop(60)
    with Watcher(warmup=2, profile_steps=2) as w:
        watched = _rebuilding_loop(60)
    assert watched == plain
    r = w.measurements()
    assert r.steps.seen == 60 and r.optimizers.built == 59
    assert r.optimizers.build_ms is not None and r.optimizers.build_ms > 0
    assert r.steps.micro_batches_per_step == 1 and r.steps.model_calls_per_step == 1


def test_an_optimizer_that_steps_twice_without_the_first_delimits_the_steps_from_then_on() -> None:
    # a second stage with its own optimizer, the first one kept: its steps were all "another optimizer's"
    model, first, x = tiny_step()
    second = torch.optim.SGD(model.parameters(), lr=0.001)
    with Watcher(warmup=1, profile_steps=0) as w:
        for optimizer, steps in ((first, 10), (second, 30)):
            for _ in range(steps):
                model(x).sum().backward()
                optimizer.step()
    r = w.measurements()
    assert r.steps.seen == 39 and r.optimizers.changes == 1  # the second one's first step is its rival's
    assert r.optimizers.built == 0  # built before the first step
    # a critic stepped 5 times per generator step: the critic delimits the steps, the generator's step is shared
    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(12):
            model(x).sum().backward()
            first.step()
            for _ in range(5):
                model(x).sum().backward()
                second.step()
    r = w.measurements()
    assert r.steps.seen == 12 * 5 - 1 + 1
    assert r.steps.optimizer_steps_per_step == 1  # most steps hold the critic's step alone


def test_a_gans_two_optimizers_each_step_are_counted() -> None:
    torch.manual_seed(0)
    g, d = nn.Linear(4, 4), nn.Linear(4, 1)
    opt_g, opt_d = torch.optim.Adam(g.parameters()), torch.optim.Adam(d.parameters())
    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(20):
            fake = g(torch.randn(8, 4))
            d_loss = d(fake.detach()).mean() - d(torch.randn(8, 4)).mean()
            opt_d.zero_grad()
            d_loss.backward()
            opt_d.step()
            g_loss = -d(fake).mean()
            opt_g.zero_grad()
            g_loss.backward()
            opt_g.step()
    r = w.measurements()
    assert r.steps.seen == 20 and r.steps.optimizer_steps_per_step == 2


def test_autograd_grad_is_a_backward_pass_and_delimits_steps_without_an_optimizer() -> None:
    model, _, x = tiny_step()
    params = list(model.parameters())

    def loop(steps: int) -> list[float]:
        losses = []
        for _ in range(steps):
            loss = model(x).square().mean()
            grads = torch.autograd.grad(loss, params)
            with torch.no_grad():
                for p, g in zip(params, grads):
                    p -= 0.01 * g
            losses.append(loss.item())
        return losses

    with Watcher(warmup=1, profile_steps=2) as w:
        loop(12)
    r = w.measurements()
    assert r.steps.seen == 12
    assert r.phases["backward"].host_ms > 0 and r.steps.micro_batches_per_step == 1


def _gradient_penalty_loop(steps: int) -> list[float]:
    """A WGAN-GP critic's step: autograd.grad of the critic's output over a leaf input, with create_graph."""
    torch.manual_seed(0)
    critic = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(critic.parameters(), lr=0.01)
    losses = []
    for _ in range(steps):
        mix = torch.randn(32, 2).requires_grad_(True)
        g, = torch.autograd.grad(critic(mix).sum(), mix, create_graph=True)
        loss = critic(mix).mean() + ((g.norm(2, dim=1) - 1) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_a_gradient_penalty_over_a_leaf_input_runs_and_is_no_micro_batch() -> None:
    # torch's FlopCounterMode hooked every module input (its module tracker): autograd.grad over a leaf input
    # then raised "A leaf node was passed to _will_engine_execute_node" from the user's code, in the CPU window
    plain = _gradient_penalty_loop(20)
    with Watcher(warmup=2, profile_steps=3) as w:
        watched = _gradient_penalty_loop(20)
    assert watched == plain
    r = w.measurements()
    assert r.window.flops_per_step is not None and r.window.flops_per_step > 0
    assert r.steps.seen == 20 and r.steps.micro_batches_per_step == 1  # create_graph: a term of the loss, not a pass


def test_an_lbfgs_closures_passes_are_inside_its_step_not_micro_batches() -> None:
    model, _, x = tiny_step()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=4)

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        return loss

    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(10):
            optimizer.step(closure)
    r = w.measurements()
    assert r.steps.seen == 10 and not any("backward calls" in note for note in r.notes)
    assert r.steps.micro_batches_per_step == 1 and r.steps.model_calls_per_step == 0


def test_the_models_calls_per_step_and_those_fed_an_earlier_calls_output_are_counted() -> None:
    model, optimizer, x = tiny_step()
    cell = nn.Linear(4, 4)
    cell_opt = torch.optim.SGD(cell.parameters(), lr=0.01)
    with Watcher(warmup=1, profile_steps=0) as w:  # one sample at a time
        for _ in range(8):
            torch.cat([model(x[i:i + 1]) for i in range(8)]).sum().backward()
            optimizer.step()
    r = w.measurements()
    assert r.steps.model_calls_per_step == 8 and r.steps.model_calls_chained == 0 and r.steps.model_calls_after_read == 0
    assert r.model.batch_size == 1
    with Watcher(warmup=1, profile_steps=0) as w:  # a cell stepped over a sequence
        for _ in range(8):
            h = torch.zeros(1, 4)
            for t in range(6):
                h = torch.tanh(cell(h + x[t:t + 1]))
            h.sum().backward()
            cell_opt.step()
    r = w.measurements()
    assert r.steps.model_calls_per_step == 6 and r.steps.model_calls_chained == 5 and r.steps.model_calls_after_read == 0
    with Watcher(warmup=1, profile_steps=0) as w:  # an agent: each input made from the action the host read
        for _ in range(8):
            obs, logps = x[0:1], []
            for t in range(5):
                out = torch.log_softmax(model(obs), -1)
                action = int(out.argmax())
                logps.append(out[0, action])
                obs = x[t + 1:t + 2] * action
            torch.stack(logps).sum().backward()
            optimizer.step()
    r = w.measurements()
    assert r.steps.model_calls_per_step == 5 and r.steps.model_calls_chained == 0 and r.steps.model_calls_after_read == 4


def test_the_optimizer_that_delimits_the_steps_is_described_as_it_was_made() -> None:
    model, _, x = tiny_step()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, foreach=False)
    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(5):
            model(x).sum().backward()
            optimizer.step()
    info = w.measurements().optimizers.info
    assert info is not None and info.kind == "Adam" and info.tensors == 4 and info.foreach is False
    assert info.elements == sum(p.numel() for p in model.parameters())
    assert w.optimizers.spec is not None and w.optimizers.spec.shapes[0] == tuple(next(model.parameters()).shape)


def test_a_teacher_called_first_under_no_grad_is_not_taken_for_the_model() -> None:
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 4))
    student = nn.Linear(8, 4)
    optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
    x = torch.randn(16, 8)
    with Watcher(warmup=2, profile_steps=0) as w:
        for _ in range(10):
            with torch.no_grad():
                target = teacher(x).softmax(1)
            loss = nn.functional.kl_div(student(x).log_softmax(1), target, reduction="batchmean")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert w.model.model is not None and w.model.model() is student
    assert w.measurements().evaluation is None  # the teacher's no_grad calls are not the model's


class _ClosureSGD(torch.optim.SGD):
    """An SGD of its own class: watching it patches this class's step alone."""


def test_a_closures_own_work_is_not_the_optimizers() -> None:
    # Lightning's automatic optimisation runs training_step, backward and its own hooks inside optimizer.step(closure):
    # the closure's forward and backward are theirs, its other work (here 3 ms of a framework's bookkeeping) is
    # "other", and the optimizer phase is the update alone. It was all "optimizer": optimizer_heavy 1.81x predicted
    # where fused=True gained 1.06x
    import time

    model, _, x = tiny_step()
    optimizer = _ClosureSGD(model.parameters(), lr=0.01)
    calls = []

    def closure() -> torch.Tensor:
        time.sleep(0.003)  # the framework's hooks and logging
        optimizer.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        calls.append(1)
        return loss

    with Watcher(warmup=1, profile_steps=0) as w:
        for step in range(12):
            if step % 2:
                optimizer.step(closure)
            else:
                optimizer.step(closure=closure)  # either way of passing it
    r = w.measurements()
    assert len(calls) == 12 and r.steps.seen == 12
    shares = {p: r.phases[p].share for p in ("forward", "backward", "optimizer", "other")}
    assert shares["other"] > 0.6 and shares["optimizer"] < 0.2, shares
    assert r.phases["forward"].host_ms > 0 and r.phases["backward"].host_ms > 0


def test_the_batch_size_is_the_training_calls_not_a_validation_pass_run_first() -> None:
    # Lightning's sanity check runs two validation batches (under no_grad, here of 256) before training (of 32)
    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Watcher(warmup=1, profile_steps=0) as w:
        model.eval()
        with torch.no_grad():
            for _ in range(2):
                model(torch.randn(256, 8))
        model.train()
        for _ in range(6):
            loss = model(torch.randn(32, 8)).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert w.measurements().model.batch_size == 32


def test_a_model_called_on_one_unbatched_sample_has_a_batch_of_one() -> None:
    # a policy called on one observation of 4 features: batch 1, not 4; a vector of ids is a batch of them
    policy, embed = nn.Linear(4, 2), nn.Embedding(10, 2)
    for model, x, batch in ((policy, torch.randn(4), 1), (embed, torch.tensor([1, 2, 3]), 3)):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        with Watcher(warmup=1, profile_steps=0) as w:
            for _ in range(4):
                model(x).sum().backward()
                optimizer.step()
        assert w.measurements().model.batch_size == batch


def test_a_gans_losses_of_one_batch_are_no_micro_batches() -> None:
    """DCGAN's step (issue 74's mislabel): the discriminator's backward on real and on fake samples, then the
    generator's, on one batch of the DataLoader: one pass a step, not 'micro-batches accumulated'."""
    torch.manual_seed(0)
    net_g = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    net_d = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    opt_d, opt_g = torch.optim.Adam(net_d.parameters()), torch.optim.Adam(net_g.parameters())
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(640, 4)), batch_size=16)
    bce = nn.BCEWithLogitsLoss()
    with Watcher(warmup=2, profile_steps=0) as w:
        for (real,) in loader:
            opt_d.zero_grad()
            err_real = bce(net_d(real), torch.ones(len(real), 1))
            err_real.backward()
            fake = net_g(torch.randn(len(real), 8))
            err_fake = bce(net_d(fake.detach()), torch.zeros(len(real), 1))
            err_fake.backward()
            opt_d.step()
            opt_g.zero_grad()
            bce(net_d(fake), torch.ones(len(real), 1)).backward()
            opt_g.step()
    r = w.measurements()
    assert r.steps.seen == 40 and r.steps.optimizer_steps_per_step == 2
    assert r.steps.micro_batches_per_step == 1
    assert not any("micro-batches" in note for note in r.notes)


def test_an_optimizer_steps_page_faults_are_counted_without_its_closures(monkeypatch) -> None:
    # the process's fault counter as the hooks read it: the step itself takes 7 pages (its pre hook, inside the
    # step), each closure call 100 (its forward and backward's, not the optimizer's)
    import trainspeed.probe.page_faults as page_faults
    import trainspeed.watch.hooks as hooks

    faults = [0]
    for module in (hooks, page_faults):
        monkeypatch.setattr(module, "minor_faults", lambda: faults[0])
    model, _, x = tiny_step()

    def bump(n: int) -> None:
        faults[0] += n

    for optimizer in (torch.optim.SGD(model.parameters(), lr=0.0), torch.optim.LBFGS(model.parameters(), max_iter=3)):
        handle = optimizer.register_step_pre_hook(lambda *_: bump(7))

        def closure() -> torch.Tensor:
            bump(100)
            model.zero_grad()
            loss = model(x).sum()
            loss.backward()
            return loss

        with Watcher(warmup=1, profile_steps=0) as w:
            for _ in range(12):
                optimizer.step(closure) if isinstance(optimizer, torch.optim.LBFGS) else (closure(), optimizer.step())
        handle.remove()
        assert w.measurements().optimizers.page_faults == 7, type(optimizer).__name__
    for module in (hooks, page_faults):  # not counted here (Windows): none said
        monkeypatch.setattr(module, "minor_faults", lambda: None)
    with Watcher(warmup=1, profile_steps=0) as w:
        seed_loop(10)
    assert w.measurements().optimizers.page_faults is None
