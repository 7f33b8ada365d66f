"""fix/edits.py's keyword arguments and settings on scripts as people write them: a DataLoader's workers (keyword
or positional, `from torch.utils.data import DataLoader` or `torch.utils.data.DataLoader`, over several lines with a
trailing comma), the loader the run measured picked out by its batch size, an optimizer's fused=True, torch's
threads after the imports or in place of the script's own call, anomaly detection off; no patch through **kwargs
or between loaders the run did not tell apart."""

from __future__ import annotations

import runpy
from pathlib import Path

import torch
from patching import only_hunk, patch_of, reason, verdict

from trainspeed.diagnose.verdict import Lever

WORKERS = Lever("dataloader", {"num_workers": 2, "persistent_workers": True}, "DataLoader(..., num_workers=2)", True,
                match={"dataset": "Shapes", "batch_size": 32})
INPUT = verdict("input_bound", lever=WORKERS)


def test_keywords_are_added_or_replaced_keyword_and_positional(tmp_path: Path) -> None:
    patch, _ = patch_of(tmp_path, """
        from torch.utils.data import DataLoader

        loader = DataLoader(Shapes(), batch_size=32, shuffle=True)  # the training data
    """, INPUT)
    assert ("loader = DataLoader(Shapes(), batch_size=32, shuffle=True, num_workers=2, persistent_workers=True)"
            "  # the training data") in only_hunk(patch)
    patch, _ = patch_of(tmp_path, """
        import torch

        loader = torch.utils.data.DataLoader(Shapes(), 32, True, None, None, 0)
    """, INPUT)
    assert "DataLoader(Shapes(), 32, True, None, None, 2, persistent_workers=True)" in only_hunk(patch)


def test_a_call_over_several_lines_with_a_trailing_comma_keeps_its_layout(tmp_path: Path) -> None:
    patch, _ = patch_of(tmp_path, """
        from torch.utils.data import DataLoader

        loader = DataLoader(
            Shapes(),
            batch_size=32,
        )
    """, INPUT)
    text = only_hunk(patch)
    assert "    batch_size=32,\n    num_workers=2,\n    persistent_workers=True,\n)" in text


def test_the_loader_the_run_measured_is_told_apart_by_its_batch_size_else_no_patch(tmp_path: Path) -> None:
    patch, _ = patch_of(tmp_path, """
        from torch.utils.data import DataLoader

        train = DataLoader(Shapes(), batch_size=args.batch_size, shuffle=True)
        test = DataLoader(Shapes(), batch_size=256)
    """, INPUT)
    text = only_hunk(patch)
    assert "shuffle=True, num_workers=2, persistent_workers=True)" in text and "batch_size=256)" in text
    patch, _ = patch_of(tmp_path, """
        from torch.utils.data import DataLoader

        train = DataLoader(Other(), batch_size=size)
        test = DataLoader(Other(), batch_size=size)
    """, INPUT)
    assert "makes 2 of DataLoader(...) (lines 3, 4) and the run did not tell which" in reason(patch)
    patch, _ = patch_of(tmp_path, """
        from torch.utils.data import DataLoader

        loader = DataLoader(Shapes(), **settings)
    """, INPUT)
    assert "passes *args or **kwargs" in reason(patch)


def test_fused_optimizer_and_its_refusal_beside_foreach(tmp_path: Path) -> None:
    fused = verdict("optimizer_heavy", lever=Lever("optimizer", {"fused": True}, "torch.optim.AdamW(..., fused=True)",
                                                   False, match={"kind": "AdamW"}))
    patch, _ = patch_of(tmp_path, """
        from torch.optim import AdamW

        opt = AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    """, fused)
    assert "AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)" in only_hunk(patch)
    assert patch.hunks[0].same_arithmetic is False
    patch, _ = patch_of(tmp_path, "import torch\nopt = torch.optim.AdamW(params, foreach=True)\n", fused)
    assert "sets foreach=" in reason(patch)


def test_threads_go_after_the_imports_or_replace_the_scripts_own_call(tmp_path: Path) -> None:
    threads = verdict("thread_oversubscription", lever=Lever("threads", {"threads": 1}, "torch.set_num_threads(1)",
                                                               False))
    patch, script = patch_of(tmp_path, '''
        """A script with a docstring."""
        from __future__ import annotations

        import torch
        from torch import nn

        torch.manual_seed(0)
        threads = torch.get_num_threads()
    ''', threads)
    text = only_hunk(patch)
    assert "from torch import nn\n\ntorch.set_num_threads(1)\n\ntorch.manual_seed(0)" in text
    script.write_text(text)
    own = torch.get_num_threads()
    try:
        assert runpy.run_path(str(script))["threads"] == 1
    finally:
        torch.set_num_threads(own)  # this test process's own
    patch, _ = patch_of(tmp_path, "import torch\n\ndef main(k):\n    torch.set_num_threads(k)\n", threads)
    assert "    torch.set_num_threads(1)\n" in only_hunk(patch) and patch.hunks[0].lines == (4, 4)
    patch, _ = patch_of(tmp_path, "from torch import nn\n\nlayer = nn.Linear(2, 2)\n", threads)
    assert only_hunk(patch).startswith("from torch import nn\nimport torch\n\ntorch.set_num_threads(1)\n\nlayer")


def test_anomaly_detection_turned_on_by_the_script_is_turned_off(tmp_path: Path) -> None:
    anomaly = verdict("anomaly_detection", lever=Lever("anomaly_off", {}, "torch.autograd.set_detect_anomaly(False)",
                                                       True))
    patch, script = patch_of(tmp_path, """
        import torch

        torch.autograd.set_detect_anomaly(True)
        with torch.autograd.detect_anomaly():
            on = torch.is_anomaly_enabled()
    """, anomaly)
    text = only_hunk(patch)
    assert text.count("torch.autograd.set_detect_anomaly(False)") == 2
    script.write_text(text)
    assert runpy.run_path(str(script))["on"] is False
    patch, _ = patch_of(tmp_path, "import torch\nx = 1\n", anomaly)
    assert "does not turn anomaly detection on itself" in reason(patch)


def test_a_framework_setting_goes_into_the_call_at_the_line_the_run_recorded(tmp_path: Path) -> None:
    patch, script = patch_of(tmp_path, """
        import lightning as L

        trainer = L.Trainer(max_steps=100,
                            val_check_interval=2)
    """)
    lever = Lever("lightning", {"Trainer.val_check_interval": 8}, "Trainer(val_check_interval=8)", True,
                  recipe="a validation every 8 steps")
    patch, _ = patch_of(tmp_path, script.read_text(), verdict("evaluation_heavy", site=f"{script}:3", lever=lever))
    assert "val_check_interval=8)" in only_hunk(patch) and patch.hunks[0].recipe == "a validation every 8 steps"


def test_an_environment_setting_and_a_recipe_choice_get_their_reason(tmp_path: Path) -> None:
    malloc = Lever("malloc", {"MALLOC_MMAP_THRESHOLD_": "33554432"}, "MALLOC_MMAP_THRESHOLD_=33554432", True)
    patch, _ = patch_of(tmp_path, "import torch\n", verdict("page_faults", lever=malloc))
    assert reason(patch).startswith("an environment setting, read before Python starts")
    patch, _ = patch_of(tmp_path, "import torch\n", verdict("small_batch"))
    assert "changes the training recipe" in reason(patch)


def test_a_setting_the_script_makes_only_on_a_flag_is_made_always(tmp_path: Path) -> None:
    checks = verdict("host_code_heavy", lever=Lever(
        "validate_args_off", {}, "torch.distributions.Distribution.set_default_validate_args(False)", True))
    patch, _ = patch_of(tmp_path, """
        import sys

        import torch

        if "--no-validate" in sys.argv:
            torch.distributions.Distribution.set_default_validate_args(False)
    """, checks)
    text = only_hunk(patch)
    assert text.count("set_default_validate_args(False)") == 2 and patch.hunks[0].lines == (4, 4)
    assert "import torch\n\ntorch.distributions.Distribution.set_default_validate_args(False)\n\nif" in text
