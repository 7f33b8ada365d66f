import pytest
import torch
from torch.utils.data import Dataset

from trainspeed.errors import UsageError
from trainspeed.workloads import BUILTINS, Workload, builtin_workload, resolve_workload
from trainspeed.workloads.digits import AugmentedDigits, DigitsCNN32
from trainspeed.workloads.workload import data_length


@pytest.mark.parametrize("name", list(BUILTINS))
def test_every_builtin_trains_one_step(name):
    wl = resolve_workload(name)
    assert isinstance(wl, Workload) and wl.description
    model, data = wl.model(), wl.data()
    if isinstance(data, Dataset):
        items = [data[i] for i in range(4)]
        batch = tuple(torch.stack([torch.as_tensor(it[j]) for it in items]) for j in range(2))
    else:
        batch = tuple(t[:4] for t in data)
    *inputs, target = batch
    loss = wl.loss()(model(*inputs), target)
    loss.backward()
    wl.optimizer(model.parameters()).step()
    assert torch.isfinite(loss)


def test_builtins_are_reproducible_and_sized():
    a, b = builtin_workload("mlp", width=32), builtin_workload("mlp", width=32)
    for p, q in zip(a.model().parameters(), b.model().parameters()):
        assert torch.equal(p, q)
    assert torch.equal(a.data()[0], b.data()[0])
    wl = resolve_workload("mlp:width=48,depth=3,batch=7,samples=100")
    assert wl.batch_size == 7 and data_length(wl.data()) == 100
    linears = [m for m in wl.model().modules() if isinstance(m, torch.nn.Linear)]
    assert [m.out_features for m in linears] == [48, 48, 48, 10]
    assert resolve_workload("iris").batch_size is None and data_length(resolve_workload("iris").data()) == 120


def test_augmented_digits_do_per_item_work():
    d = AugmentedDigits()
    x, y = d[5]
    assert x.shape == (1, 32, 32) and 0 <= float(x.min()) and float(x.max()) <= 1 and int(y) == int(d.target[5])
    assert DigitsCNN32()(x.unsqueeze(0)).shape == (1, 10)
    assert len(d) == 1797


@pytest.mark.parametrize("spec, message", [
    ("resnet50", "unknown workload 'resnet50'"),
    ("mlp:width", "expected KEY=VALUE"),
    ("mlp:size=3", "unknown parameter 'size' (it takes: width, depth, batch, features, samples)"),
    ("iris:width=3", "it takes: none"),
    ("cnn:width=-2", "width must be a positive integer"),
])
def test_bad_specs(spec, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_workload(spec)
