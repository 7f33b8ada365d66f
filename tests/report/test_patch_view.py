"""report/patch.py: where the patch went and how to apply it, each edit with its lines and what it changes in the
recipe, each verdict without one with its reason, and the diff printed whole and unwrapped, added lines green."""

from __future__ import annotations

from rich.console import Console

from trainspeed.fix.result import Hunk, Patch, Skipped
from trainspeed.report.patch import diff_text, patch_dict, patch_view

LONG = "+            torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict(), 'step': step}, path)"
PATCH = Patch("examples/train.py", "examples/train.py",
              [Hunk("checkpoint_heavy", (32, 32), "save only when `step % 67 == 0`", True, "a checkpoint every 67 steps",
                    ""),
               Hunk("input_bound", (13, 40), "the DataLoader made with num_workers=2", False, None, "")],
              [Skipped("page_faults", "an environment setting, read before Python starts")],
              f"--- a/examples/train.py\n+++ b/examples/train.py\n@@ -32,1 +32,2 @@\n-    old\n{LONG}\n",
              written="reports/trainspeed.patch")


def _printed(patch: Patch) -> str:
    console = Console(width=80, record=True, color_system=None)
    for line in patch_view(patch):
        console.print(line, soft_wrap=True)
    console.print(diff_text(patch), soft_wrap=True, end="")
    return console.export_text()


def test_the_patch_is_said_with_its_file_each_edit_and_each_reason_and_the_diff_unwrapped() -> None:
    text = _printed(PATCH)
    assert text.splitlines()[0] == ("Patch of examples/train.py written to reports/trainspeed.patch: apply it with "
                                    "`git apply reports/trainspeed.patch` (or `patch -p1 < reports/trainspeed.patch`) "
                                    "in the script's repository; nothing is changed until then")
    assert ("  checkpoint_heavy, line 32: save only when `step % 67 == 0`; changes the recipe: a checkpoint every 67 "
            "steps") in text
    assert "  input_bound, lines 13-40: the DataLoader made with num_workers=2\n" in text
    assert "  page_faults: no patch: an environment setting, read before Python starts" in text
    assert text.endswith(PATCH.diff) and LONG in text.splitlines()  # no line of the diff cut at 80 columns


def test_added_lines_are_green_removed_red_and_no_patch_is_said_as_such() -> None:
    styles = {str(span.style) for span in diff_text(PATCH).spans}
    assert {"green", "red", "cyan", "bold"} <= styles
    none = Patch("train.py", "train.py", [], [Skipped("small_batch", "a choice of recipe")], "")
    assert _printed(none).splitlines() == ["No patch of train.py: no verdict's fix is an edit it can make",
                                           "  small_batch: no patch: a choice of recipe"]


def test_the_json_part_holds_every_edit_without_the_patched_text() -> None:
    data = patch_dict(PATCH)
    assert data["written"] == "reports/trainspeed.patch" and data["diff"] == PATCH.diff
    assert data["hunks"][0] == {"verdict": "checkpoint_heavy", "lines": [32, 32], "said": "save only when `step % 67 "
                                "== 0`", "same_arithmetic": True, "recipe": "a checkpoint every 67 steps"}
    assert data["skipped"] == [{"verdict": "page_faults", "reason": "an environment setting, read before Python starts"}]
