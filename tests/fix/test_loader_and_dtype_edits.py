"""fix/loaders.py and fix/dtype.py: a TensorDataset's loader made to take each batch whole hands out the very
batches it did (same order, same values), a dataset built in the call named for the sampler; float64 made float32
where the script made it so (.double(), dtype=torch.float64, numpy floats), integer labels left as they are."""

from __future__ import annotations

import runpy
from pathlib import Path

import torch
from patching import only_hunk, patch_of, reason, verdict

from trainspeed.diagnose.verdict import Lever

BATCHED = verdict("input_bound", lever=Lever("dataloader", {"batched": True}, "DataLoader(...BatchSampler...)", True,
                                             match={"dataset": "TensorDataset", "batch_size": 8}))
LOADER = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    x, y = torch.randn(50, 3), torch.arange(50)
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True, drop_last=True)
    batches = [(xb.clone(), yb.clone()) for xb, yb in loader]
"""


def test_the_batched_loader_hands_out_the_same_batches_in_the_same_order(tmp_path: Path) -> None:
    patch, script = patch_of(tmp_path, LOADER, BATCHED)
    with torch.random.fork_rng():  # the scripts seed torch: this process's own state kept
        before = runpy.run_path(str(script))["batches"]
    text = only_hunk(patch)
    assert ("DataLoader((dataset := TensorDataset(x, y)), batch_size=None, sampler=torch.utils.data.BatchSampler("
            "torch.utils.data.RandomSampler(dataset), 8, drop_last=True))") in text
    assert patch.hunks[0].same_arithmetic
    script.write_text(text)
    with torch.random.fork_rng():
        after = runpy.run_path(str(script))["batches"]
    assert len(after) == len(before) == 6
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(after, before, strict=True))


def test_a_named_dataset_without_shuffle_takes_the_scripts_own_sampler_imports(tmp_path: Path) -> None:
    patch, _ = patch_of(tmp_path, """
        from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

        loader = DataLoader(data, 8)
    """, BATCHED)
    assert ("DataLoader(data, batch_size=None, sampler=BatchSampler(SequentialSampler(data), 8, drop_last=False))"
            in only_hunk(patch))
    patch, _ = patch_of(tmp_path, "from torch.utils.data import DataLoader\nloader = DataLoader(data, 8)\n", BATCHED)
    assert "binds neither SequentialSampler nor `torch`" in reason(patch)


def test_float64_becomes_float32_and_labels_stay_integers(tmp_path: Path) -> None:
    patch, script = patch_of(tmp_path, """
        import numpy as np
        import torch

        rows = np.arange(12).reshape(4, 3)
        x = torch.tensor(rows / 11.0)  # numpy's float64
        y = torch.tensor(rows[:, 0] % 2)
        w = torch.zeros(3, 1, dtype=torch.float64)
        z = rows.astype(np.float64)
        model = torch.nn.Linear(3, 1).double()
        out = model(x) + x @ w
    """, verdict("slow_dtype"))
    text = only_hunk(patch)
    script.write_text(text)
    ran = runpy.run_path(str(script))
    assert ran["x"].dtype == ran["w"].dtype == ran["out"].dtype == torch.float32 and ran["z"].dtype.name == "float32"
    assert ran["y"].dtype == torch.int64
    assert "x = torch.tensor(rows / 11.0).float()  # numpy's float64" in text
    patch, _ = patch_of(tmp_path, "import torch\nx = torch.ones(3)\n", verdict("slow_dtype"))
    assert "the float64 comes from elsewhere" in reason(patch)
