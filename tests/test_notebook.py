"""trainspeed in a real Jupyter kernel: `%load_ext trainspeed`, a `%%trainspeed` cell that trains, and result
objects shown by a bare expression (the `notebook` extra; nbclient executes the notebook as Jupyter would)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from planted import planted_detail

nbformat = pytest.importorskip("nbformat", reason="the notebook extra is not installed")
nbclient = pytest.importorskip("nbclient", reason="the notebook extra is not installed")
pytest.importorskip("ipykernel", reason="the notebook extra is not installed")

TRAIN = """\
import torch
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(256, 16), torch.randint(0, 2, (256,))
losses = []
for step in range(200):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
"""


def _html(cell: dict) -> str:  # type: ignore[type-arg]
    return "".join(o.get("data", {}).get("text/html", "") for o in cell["outputs"])


def test_a_cell_is_watched_and_its_report_shown_inline(tmp_path: Path) -> None:
    cells = [
        "import torch, trainspeed\ntrainspeed.estimate_memory(lambda: torch.nn.Linear(16, 2), [16], 8)",
        "%load_ext trainspeed",
        f"%%trainspeed --steps 120 --json {tmp_path / 'cell.json'}\n{TRAIN}",
        "print(len(losses), trainspeed_report.watch.steps.seen)",
        "import trainspeed\ntrainspeed.estimate_memory(lambda: torch.nn.Linear(16, 2), [16], 8)",
        "%%trainspeed --steps 0\npass",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    early, magic, counted, memory, bad = nb.cells[0], nb.cells[2], nb.cells[3], nb.cells[4], nb.cells[5]
    assert "<pre>" in _html(early)  # a result object renders from `import trainspeed` on, before %load_ext
    page = _html(magic)
    # the doctor's own HTML report, inline in an iframe (its styles stay its own), and the JSON written
    assert page.startswith("<iframe srcdoc=") and "trainspeed doctor" in page
    data = json.loads((tmp_path / "cell.json").read_text())
    assert data["steps"]["seen"] == 120 and data["command"] == f"%%trainspeed --steps 120 --json {tmp_path / 'cell.json'}"
    # --steps stopped the cell's loop quietly at the 120th step's end (inside opt.step(): its loss line did not run),
    # as `trainspeed doctor --steps` stops a script; the report stays in the namespace
    assert "".join(o.get("text", "") for o in counted["outputs"]).split() == ["119", "120"]
    # a bare expression holding a result object renders it, once, and its header names no empty field
    assert "<pre>" in _html(memory) and "peak" in _html(memory).lower()
    assert [o["output_type"] for o in memory["outputs"]] == ["execute_result"], memory["outputs"]
    assert "batch 8; adam" in _html(memory) and " of  ;" not in _html(memory)
    # a bad option is one line, and the cell does not run
    bad_text = "".join(o.get("text", "") for o in bad["outputs"])
    assert bad_text.strip().splitlines() == ["trainspeed: error: argument --steps: expected a positive integer, got 0"]
    # the cell's tiny MLP is launch-bound, as the seed loop (beside busy processes the test skips if it was not named)
    planted_detail(data, "launch_bound" in page, "launch_bound in the inline report")
