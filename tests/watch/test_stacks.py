"""What a stack sample says (`watch/stacks.py`): the user's line, the loop's line, the library, the framework."""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace
from typing import Any

import torch

from trainspeed.watch.stacks import framework_function, library_of, site_and_library, sites_of
from trainspeed.watch.syncs import SyncCounter


def other_site(frame: Any) -> str | None:
    """The innermost user line a sample of `frame` would charge (`sites_of` with no training loop known)."""
    return sites_of(frame)[0]


def _here() -> str:
    frame = sys._getframe(1)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def test_a_user_line_outside_torch_is_other() -> None:
    site, expected = other_site(sys._getframe()), _here()
    assert site == expected


def test_a_stack_inside_a_module_call_is_not_other() -> None:
    seen: list[str | None] = []

    class Probe(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(other_site(sys._getframe()))  # user code, but under Module.__call__
            return x

    Probe()(torch.zeros(1))
    assert seen == [None]


def test_a_stack_inside_backward_or_an_optimizer_is_not_other() -> None:
    seen: list[str | None] = []
    w = torch.nn.Parameter(torch.ones(2))
    w.register_hook(lambda g: seen.append(other_site(sys._getframe())))
    (w * 2).sum().backward()
    opt = torch.optim.SGD([w], lr=0.1)
    opt.register_step_pre_hook(lambda *a: seen.append(other_site(sys._getframe())))
    opt.step()
    assert seen == [None, None]


def test_a_stack_inside_a_counted_read_is_the_sync_phase_not_other() -> None:
    during: list[str | None] = []

    class Probe(torch.Tensor):  # runs Python inside the read itself
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if getattr(func, "__name__", "") == "item":
                during.append(other_site(sys._getframe()))
            return super().__torch_function__(func, types, args, kwargs or {})

    x = torch.tensor(1.0).as_subclass(Probe)
    with SyncCounter(on_read=lambda *a: None):
        x.item()
    assert during == [None]
    x.item()  # no counter: no wrapper on the stack, the line is other
    assert during[-1] is not None and __file__ in during[-1]


def test_the_watchers_own_code_under_a_user_line_is_not_that_lines_other() -> None:
    """The watcher's wrappers (around a module call, backward) run a little outside the phase they time;
    a sample landing there is the cost of watching, which no line of the script has."""
    import trainspeed.watch.hooks as watcher_module

    seen: list[str | None] = []
    probe = "seen.append(other_site(sys._getframe()))"
    for filename in (watcher_module.__file__, __file__):
        exec(compile(probe, filename, "exec"), {"seen": seen, "other_site": other_site, "sys": sys})
    assert seen[0] is None  # in the watcher's source, under this test's line
    assert seen[1] is not None and seen[1].startswith(__file__)  # the same in the user's own file


def test_trainspeeds_own_code_charges_no_line_of_its_caller() -> None:
    """The demo's loop, the CLI: trainspeed's code outside the watcher, called from a launcher (the console script
    `.venv/bin/trainspeed`, or this test): a sample there is none of the caller's lines."""
    import trainspeed.cli as cli_module
    import trainspeed.demo.variants as demo_module

    seen: list[str | None] = []
    probe = "seen.append(other_site(sys._getframe()))"
    for filename in (demo_module.__file__, cli_module.__file__):
        exec(compile(probe, filename, "exec"), {"seen": seen, "other_site": other_site, "sys": sys})
    assert seen == [None, None]


def test_a_samples_innermost_library_is_named_by_its_import_name() -> None:
    import json

    seen: list[tuple[str | None, str | None, str | None, str | None]] = []

    class Spy(json.JSONEncoder):
        def default(self, o: object) -> object:
            seen.append(site_and_library(sys._getframe(1)))  # inside json's encoder, under this test's line
            return str(o)

    json.dumps({"a": object()}, cls=Spy)
    (site, outer, library, framework), = seen
    assert outer is None and framework is None  # no training loop learnt, no framework on the stack
    assert site is not None and site.startswith(__file__) and library == "json"
    assert library_of(sys._getframe()) is None  # the user's own code
    # torch's own Python by its package (a module of torch's top level is "torch"), other packages by theirs
    torch_dir = os.path.dirname(torch.__file__)

    def at(*path: str) -> SimpleNamespace:
        return SimpleNamespace(f_code=SimpleNamespace(co_filename=os.path.join(*path)))

    assert library_of(at(torch_dir, "distributions", "categorical.py")) == "torch.distributions"
    assert library_of(at(torch_dir, "_tensor.py")) == library_of(at(torch_dir, "functional.py")) == "torch"
    assert library_of(at(torch_dir, "_refs", "__init__.py")) == "torch"
    assert library_of(at("/venv", "lib", "site-packages", "numpy", "_core", "_methods.py")) == "numpy"
    assert library_of(at("/venv", "lib", "site-packages", "six.py")) == "six"
    assert library_of(None) is None


def test_a_sample_names_the_training_loops_line_that_called_its_function() -> None:
    from trainspeed.watch.stacks import loop_codes, sites_of

    def helper() -> tuple[str | None, str | None]:
        return sites_of(sys._getframe(), loop)  # a line of a function the loop called

    def step_end() -> tuple[object, ...]:
        return loop_codes(sys._getframe(1))  # as the watcher learns them at a step's end: this test's frames

    codes = step_end()
    assert sys._getframe().f_code in codes and step_end.__code__ not in codes
    loop = frozenset(id(code) for code in codes)
    (site, outer), line = helper(), _here()
    assert site is not None and site != line and site.startswith(__file__)
    assert outer == line  # the loop's own line, the call
    own, own_line = sites_of(sys._getframe(), loop), _here()
    assert own == (own_line, own_line)  # the loop's own code: the same line twice
    assert sites_of(sys._getframe())[1] is None  # no loop learnt yet


def test_a_samples_framework_function_is_its_innermost_frame_in_a_framework() -> None:
    def frame(path: str, name: str, back: object = None) -> SimpleNamespace:
        return SimpleNamespace(f_code=SimpleNamespace(co_filename=path, co_name=name), f_back=back)

    site = os.path.join("/venv", "lib", "site-packages")
    fit = frame(os.path.join(site, "lightning", "pytorch", "trainer", "trainer.py"), "fit", frame("/me/train.py", "main"))
    bar = frame(os.path.join(site, "lightning", "pytorch", "callbacks", "progress", "tqdm_progress.py"),
                "on_train_batch_end", fit)
    inner = frame(os.path.join(site, "tqdm", "std.py"), "refresh", bar)
    assert framework_function(inner) == "lightning/pytorch/callbacks/progress/tqdm_progress.py:on_train_batch_end"
    assert framework_function(frame("/me/train.py", "main")) is None


def test_a_sample_while_waiting_on_data_names_the_users_line_the_dataloader_ran() -> None:
    from torch.utils.data import DataLoader, Dataset

    from trainspeed.watch.stacks import data_site

    seen: list[tuple[object, str]] = []
    package = os.path.join("/venv", "lib", "site-packages", "PIL", "Image.py")

    class Items(Dataset[int]):
        def __len__(self) -> int:
            return 2

        def __getitem__(self, i: int) -> int:
            if i == 0:
                seen.append((data_site(sys._getframe()), _here()))  # a transform's own line
            else:  # a line that calls into another package: the line, inside that package
                scope = {"data_site": data_site, "sys": sys}
                line = f"{__file__}:{sys._getframe().f_lineno + 1}"  # the next one
                exec(compile("found = data_site(sys._getframe())", package, "exec"), scope)
                seen.append((scope["found"], line))
            return i

    list(DataLoader(Items(), batch_size=2))
    (first, line0), (second, line1) = seen
    assert first == (line0, None)
    assert second == (line1, "PIL")
    assert data_site(sys._getframe()) is None  # no DataLoader on the stack: not a wait on data


def test_a_sample_in_a_package_or_the_dataloaders_own_code_names_its_function() -> None:
    import trainspeed.watch.hooks as watcher_module
    from trainspeed.watch.stacks import data_site, machinery_of

    def frame(path: str, name: str, back: object = None) -> SimpleNamespace:
        return SimpleNamespace(f_code=SimpleNamespace(co_filename=path, co_name=name), f_back=back, f_lineno=1)

    data = os.path.join(os.path.dirname(torch.__file__), "utils", "data")
    loop = frame("/me/train.py", "main")
    fetch = frame(os.path.join(data, "_utils", "fetch.py"), "fetch", frame(os.path.join(data, "dataloader.py"),
                                                                          "__next__", loop))
    site = os.path.join("/venv", "lib", "site-packages")
    folder = frame(os.path.join(site, "torchvision", "datasets", "folder.py"), "__getitem__", fetch)
    resize = frame(os.path.join(site, "PIL", "Image.py"), "resize",
                   frame(os.path.join(site, "torchvision", "transforms", "functional.py"), "resize", folder))
    # torchvision's ImageFolder with its transforms, no line of the user's: the innermost package function
    assert data_site(resize) == ("PIL/Image.py:resize", "PIL")
    assert machinery_of("PIL/Image.py:resize") is None
    collate = frame(os.path.join(data, "_utils", "collate.py"), "collate_tensor_fn", fetch)
    assert data_site(collate) == ("torch/utils/data/_utils/collate.py:collate_tensor_fn", "torch.utils")
    assert machinery_of("torch/utils/data/_utils/collate.py:collate_tensor_fn") == "collating samples into a batch"
    poll = frame(os.path.join(os.path.dirname(os.__file__), "multiprocessing", "connection.py"), "poll",
                 frame(os.path.join(data, "dataloader.py"), "_try_get_data", loop))
    assert data_site(poll) == ("torch/utils/data/dataloader.py:_try_get_data", "multiprocessing")
    assert machinery_of(data_site(poll)[0]) == "waiting on the worker processes' batches"  # type: ignore[index]
    # the watcher counting a read a transform made: the cost of watching, no line's
    assert data_site(frame(watcher_module.__file__, "wrapper", frame("/me/train.py", "crop", fetch))) is None
