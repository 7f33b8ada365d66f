"""fix/edits.py's every-N-steps edit on scripts written as people write them: a save, a log line, a metric, an
evaluation put under `if COUNTER % N == 0:` with the loop's own counter (or enumerate added), comments kept, the
lines that only feed them taken along, and no patch where skipping them would change what the loop reads."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from patching import only_hunk, patch_of, reason, verdict

CHECKPOINT = verdict("checkpoint_heavy", fix="if step % 4 == 0: torch.save(...)")


def test_a_save_every_step_goes_under_the_loops_own_counter_and_the_patched_script_saves_every_4th(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    patch, script = patch_of(tmp_path, """
        import torch

        model = torch.nn.Linear(2, 1)
        for step in range(10):
            model(torch.ones(2)).sum().backward()
            # the whole state, every step
            torch.save({"model": model.state_dict(), "step": step},
                       f"checkpoint-{step}.pt")  # a call over two lines
    """, CHECKPOINT)
    text = only_hunk(patch)
    assert "    # the whole state, every step\n    if step % 4 == 0:\n        torch.save(" in text  # the comment stays above
    assert 'f"checkpoint-{step}.pt")  # a call over two lines' in text
    assert patch.hunks[0].lines == (7, 8) and "the loop's own counter `step`" in patch.hunks[0].said
    script.write_text(text)
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(script))
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*.pt")) == ["checkpoint-0.pt", "checkpoint-4.pt",
                                                                        "checkpoint-8.pt"]


def test_enumerates_counter_is_used_and_a_loop_without_one_gets_enumerate(tmp_path: Path) -> None:
    patch, _ = patch_of(tmp_path, """
        import torch
        from torch import save

        def train(loader, model):
            for i, (x, y) in enumerate(loader):
                model(x).sum().backward()
                save(model.state_dict(), "m.pt")
    """, CHECKPOINT)
    assert "        if i % 4 == 0:\n            save(model.state_dict()" in only_hunk(patch)
    patch, _ = patch_of(tmp_path, """
        import torch

        def train(loader, model, step):
            for x, y in loader:
                model(x).sum().backward()
                torch.save(model.state_dict(), "m.pt")
    """, CHECKPOINT)
    text = only_hunk(patch)
    assert "for batch_index, (x, y) in enumerate(loader):" in text  # `step` is taken: a parameter
    assert "if batch_index % 4 == 0:" in text and "from enumerate() added" in patch.hunks[0].said


def test_a_save_inside_the_scripts_own_function_is_guarded_where_the_loop_calls_it(tmp_path: Path) -> None:
    patch, _ = patch_of(tmp_path, """
        import torch

        def save_checkpoint(model, path):
            torch.save(model.state_dict(), path)

        for epoch in range(3):
            for step in range(100):
                loss = step * 2
                save_checkpoint(None, "m.pt")
    """, CHECKPOINT)
    text = only_hunk(patch)
    assert "        if step % 4 == 0:\n            save_checkpoint(None" in text
    assert "counts from 0 again on each pass of the loop around it" in patch.hunks[0].said


def test_an_existing_interval_is_changed_not_wrapped_again(tmp_path: Path) -> None:
    patch, _ = patch_of(tmp_path, """
        import torch

        for step in range(100):
            if step % 10 == 0:
                model.eval()
                evaluate()
                model.train()
    """, verdict("evaluation_heavy", fix="if step % 40 == 0: evaluate(...)"))
    text = only_hunk(patch)
    assert "if step % 40 == 0:" in text and "% 10" not in text
    assert "instead of every 10" in patch.hunks[0].said


def test_an_evaluation_from_eval_to_train_is_wrapped_with_what_reads_its_result(tmp_path: Path) -> None:
    patch, _ = patch_of(tmp_path, """
        import torch

        for step in range(100):
            loss = model(x).sum()
            loss.backward()
            model.eval()
            with torch.no_grad():
                accuracy = (model(x_val).argmax(1) == y_val).float().mean()
            model.train()
            print(f"{step}: {accuracy:.3f}")
    """, verdict("evaluation_heavy", fix="if step % 200 == 0: evaluate(...)"))
    text = only_hunk(patch)
    assert ("    if step % 200 == 0:\n        model.eval()\n        with torch.no_grad():\n            accuracy"
            in text)
    assert '        model.train()\n        print(f"{step}: {accuracy:.3f}")' in text  # print reads what it made


def test_a_log_line_takes_the_record_it_alone_reads_and_runs_every_n(tmp_path: Path) -> None:
    patch, script = patch_of(tmp_path, """
        import json

        lines = []
        for step in range(6):
            loss = step * 0.5
            record = {"step": step, "loss": loss}
            lines.append(json.dumps(record)); lines.append("")  # two statements, one line
        final = loss
    """, verdict("logging_heavy", fix="run it only when step % 3 == 0", site=None))
    assert "the run named no line" in reason(patch)
    patch, script = patch_of(tmp_path, script.read_text(),
                             verdict("logging_heavy", fix="run it only when step % 3 == 0", site=f"{script}:7"))
    text = only_hunk(patch)
    assert "    if step % 3 == 0:\n        record = {" in text and "    loss = step * 0.5\n" in text
    assert patch.hunks[0].lines == (6, 7)
    script.write_text(text)
    ran = runpy.run_path(str(script))
    assert [line for line in ran["lines"] if line] == ['{"step": 0, "loss": 0.0}', '{"step": 3, "loss": 1.5}']
    assert ran["final"] == 2.5  # the loop's own work untouched


def test_no_patch_where_the_line_sets_what_the_loop_reads_after_it_or_in_a_while_loop(tmp_path: Path) -> None:
    source = """
        total = 0.0
        for step in range(10):
            loss = model(x)
            total += loss.item()
        print(total / 10)
    """
    patch, script = patch_of(tmp_path, source)
    patch, _ = patch_of(tmp_path, source, verdict("sync_bound", fix="read it when step % 5 == 0",
                                                  site=f"{script}:4"))
    assert "sets total, which the script reads after it" in reason(patch)
    patch, script = patch_of(tmp_path, "import torch\nwhile True:\n    torch.save(1, 'x')\n", CHECKPOINT)
    assert "is a while loop with no counter of its own" in reason(patch)
    patch, script = patch_of(tmp_path, "import torch\ntorch.save(1, 'x')\n", CHECKPOINT)
    assert "makes no such call inside a loop" in reason(patch)


def test_a_verdict_without_an_interval_or_about_another_file_gets_the_reason(tmp_path: Path) -> None:
    patch, _ = patch_of(tmp_path, "for step in range(3):\n    print(step)\n",
                        verdict("logging_heavy", fix="log less often", site="elsewhere.py:2"))
    assert "is in another file than the script" in reason(patch)
    patch, script = patch_of(tmp_path, "for step in range(3):\n    print(step)\n")
    patch, _ = patch_of(tmp_path, script.read_text(),
                        verdict("logging_heavy", fix="log less often", site=f"{script}:2"))
    assert "found no interval in steps" in reason(patch)
