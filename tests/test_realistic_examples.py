"""The doctor on examples/realistic/, scripts shaped like popular public training programs: what each script really
does (its steps, evaluations, saves and the reads its lines make, worked out from the script) against the report,
and the verdict named first."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import planted
import pytest
import torch
from planted import first_planted, loaded, planted_detail, unloaded_verdicts

from trainspeed.cli import main

REALISTIC = Path(__file__).resolve().parents[1] / "examples" / "realistic"

pytestmark = pytest.mark.planted


def _doctor(script: str, args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    """The doctor's JSON on a script, and what the script printed (stderr, while stdout carries the JSON)."""
    assert main(["doctor", "--json", "-", str(REALISTIC / script), *args]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err


def _reads(data: dict[str, Any], line_text: str, op: str) -> int:
    """The reads of CPU tensors the report charges to the script's line holding `line_text` (made by `op`)."""
    found = 0
    for site in data["host_read_sites"]:
        path, line = site["where"].rsplit(":", 1)
        if site["op"] == op and line_text in Path(path).read_text().splitlines()[int(line) - 1]:
            found += site["count"]
    return found


def _planted(data: dict[str, Any]) -> list[str]:
    return [v["id"] for v in unloaded_verdicts(data)]


def test_char_gpt(capsys: pytest.CaptureFixture[str]) -> None:
    steps, every, iters, batch = 60, 10, 10, 12
    data, _ = _doctor("char_gpt.py", ["--max-iters", str(steps), "--eval-interval", str(every), "--eval-iters",
                                      str(iters)], capsys)
    evals = math.ceil(steps / every)  # before step 0, 10, ..., 50
    assert data["steps"]["seen"] == steps and data["batch_size"] == batch
    ev = data["evaluation"]
    assert (ev["in_run"], ev["every_steps"], ev["by"]) == (evals, every, "model.eval()")  # one per estimate_loss()
    # each batch slices the memmap with 0-d index tensors: two reads a row (i and i + block) on each of x's and y's
    # lines, for the training batches and the evaluations' 2 x eval_iters batches alike; CPU tensors, no syncs
    batches = steps + evals * 2 * iters
    assert _reads(data, "x = torch.stack", "__index__") == batches * batch * 2
    assert _reads(data, "losses[k] = loss.item()", "item") == evals * 2 * iters
    assert data["per_step"]["syncs"] == 0 and data["sync_sites"] == []
    assert data["saves"]["count"] == 0
    first_planted(data, "evaluation_heavy")


def test_image_classifier(capsys: pytest.CaptureFixture[str]) -> None:
    data, _ = _doctor("image_classifier.py", ["--epochs", "2"], capsys)
    per_epoch = math.ceil(1500 / 64)
    assert data["steps"]["seen"] == 2 * per_epoch and data["batch_size"] == 64
    ev = data["evaluation"]  # at each epoch's end, the last with no train() after it
    assert (ev["in_run"], ev["every_steps"]) == (2, per_epoch)
    # the per-sample transforms' own reads: a crop's offsets and a flip's coin, once per sample
    assert _reads(data, "top, left = torch.randint", "tolist") == 2 * 1500
    first_planted(data, "input_bound")
    # what the wait ran: the per-sample transforms, lines of the script (a 2-epoch run has a dozen or so samples)
    script = (REALISTIC / "image_classifier.py").read_text().splitlines()
    first, last = (next(i for i, text in enumerate(script, 1) if text.startswith(start))
                   for start in ("class Compose", "def main"))
    sites = data["data_sites"]
    assert sum(d["samples"] for d in sites) >= 5 and sum(d["share_of_data"] for d in sites) <= 1 + 1e-9
    mine = [d for d in sites if d["where"].startswith(str(REALISTIC / "image_classifier.py") + ":")]
    assert sum(d["share_of_data"] for d in mine) >= 0.6
    # each a line of a transform or of __getitem__
    assert all(first < int(d["where"].rsplit(":", 1)[1]) < last and d["code"] for d in mine)
    assert all(d["machinery"] for d in sites if d not in mine)  # the rest: the DataLoader's own code
    # workers where the machine has cores for them beside the CNN's compute; on 2 cores, a cheaper __getitem__
    action = next(v for v in data["verdicts"] if v["id"] == "input_bound")["action"]
    assert "num_workers=" in action or "cheaper (precompute, cache)" in action


def test_finetune_accum(capsys: pytest.CaptureFixture[str]) -> None:
    steps, accum, save_every = 40, 4, 10
    data, _ = _doctor("finetune_accum.py", ["--steps", str(steps), "--accum", str(accum), "--save-every",
                                            str(save_every)], capsys)
    assert data["steps"]["seen"] == steps and data["per_step"]["micro_batches"] == accum  # optimizer steps, not passes
    assert data["batch_size"] == 8 and data["evaluation"] is None
    assert data["saves"] == {"count": steps // save_every, "every_steps": save_every, "calls": steps // save_every}
    assert _reads(data, "running += loss.item()", "item") == steps * accum and data["per_step"]["host_reads"] >= accum
    # a transformer on the CPU, saving now and then: its encoder's dropout draws a random number per element of
    # 32 masks a step, about a quarter of it (the draws alone predict 1.3x; dropout 0 measured 1.72x, 2026-11-26)
    first_planted(data, "dropout_heavy")
    assert [i for i in _planted(data) if i not in ("compute_bound", "dropout_heavy")] == []


def test_vae(capsys: pytest.CaptureFixture[str]) -> None:
    data, _ = _doctor("vae.py", ["--epochs", "3"], capsys)
    per_epoch = math.ceil(1500 / 32)
    assert data["steps"]["seen"] == 3 * per_epoch and data["batch_size"] == 32
    assert (data["evaluation"]["in_run"], data["evaluation"]["every_steps"]) == (3, per_epoch)
    assert data["saves"] == {"count": 3, "every_steps": per_epoch, "calls": 3}
    assert _reads(data, "train_loss += loss.item()", "item") == 3 * per_epoch
    first_planted(data, "launch_bound")  # a 64-128-8 MLP: per-op overhead, not arithmetic


def test_policy_gradient(capsys: pytest.CaptureFixture[str]) -> None:
    # 60 episodes: at 30 the stack samples in "other" were 9 (2026-11-27), near the 5 a line's verdict needs, and a
    # fresh-clone run of the suite once named no line
    data, printed = _doctor("policy_gradient.py", ["--episodes", "60"], capsys)
    lengths = [int(n) for n in re.search(r"episode lengths: \[([0-9, ]+)\]", printed).group(1).split(",")]  # type: ignore[union-attr]
    assert data["steps"]["seen"] == 60 and data["batch_size"] == 1  # one observation per call
    assert _reads(data, "env.step(action.item())", "item") == sum(lengths)  # one action read per environment step
    assert data["evaluation"] is None
    found = _planted(data)
    # a policy of two small layers called once per environment step: per-op overhead in the model and in
    # torch.distributions' checks, within noise of each other. The time in torch.distributions, spread over the
    # lines that build, sample and score the distribution, is named as the script's host code, or (where torch's
    # ops there explain it: their time in the profiler window grows with a busy machine's) as work outside the phases
    assert found and found[0] in ("launch_bound", "host_code_heavy", "outside_work")
    assert {"host_code_heavy", "outside_work"} & set(found)
    # the model's per-op overhead and its batch of one, wherever the profiler window ran at the run's pace: its ops
    # take about 6 of the median step's 14 ms. Where other tenants of the machine slowed the window (one run in
    # 16, 2026-11-26: the process had 82% of a core, the window's ops 11.6 ms), launch_bound says their time is
    # not a fixed cost. Beside busy processes the two are judged on the phases less their waits, which a heavy load
    # can leave above the window's ops (a CI run of 2026-12-02 named host_code_heavy alone): checked as a planted detail
    if data["per_step"]["ops_ms"] < 0.6 * data["steps"]["median_ms"]:
        planted_detail(data, "launch_bound" in found and "small_batch" in found,
                       f"launch_bound and small_batch among {found}")


def test_tabular_mlp(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pandas", reason="pandas is not installed (pip install -e .[dev] installs it)")
    data, _ = _doctor("tabular_mlp.py", ["--epochs", "3", "--rows", "20000"], capsys)
    per_epoch = math.ceil(20000 / 256)
    assert data["steps"]["seen"] == 3 * per_epoch and data["batch_size"] == 256
    assert _reads(data, "total += loss.item()", "item") == 3 * per_epoch and data["evaluation"] is None
    # a 56-128-64-2 MLP on batches of 256: its ops' fixed cost is the planted one. Where the CPU dispatches an op
    # cheaply that cost is the unfused Adam's per-parameter ops more than the model's (a CI run of 2026-12-03: a
    # 0.76 ms step, optimizer 38% of it, optimizer_heavy alone; fused=True measured 1.19x against 1.25x predicted on
    # the Intel VM, BENCHMARKS.md "The fix as a patch"); elsewhere launch_bound (1.26 ms on Zen 4, 1.8x an upper bound)
    first_planted(data, ("launch_bound", "optimizer_heavy"))


def test_frame_rows(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pandas", reason="pandas is not installed (pip install -e .[dev] installs it)")
    data, _ = _doctor("frame_rows.py", ["--epochs", "3", "--rows", "2000"], capsys)
    per_epoch, val = math.ceil(1600 / 32), math.ceil(400 / 32)  # a fifth of the rows held out
    assert data["steps"]["seen"] == 3 * per_epoch and data["batch_size"] == 32
    assert [ld["batches"] for ld in data["loaders"]] == [3 * per_epoch, 3 * val]  # the training and validation loaders
    assert data["evaluation"]["in_run"] == 3 and _reads(data, "total += loss.item()", "item") == 3 * per_epoch
    # every batch while measured came from a worker process: the measured steps' and the three validation passes'
    workers = data["loader_workers"]
    assert workers["batches"] == data["steps"]["measured"] + 3 * val and workers["cpu_ms_per_batch"] > 0
    verdict = first_planted(data, "input_bound")
    assert "num_workers=2" in verdict["action"] and f"handed over {workers['batches']} batches" in verdict["evidence"]
    # what the worker made its batches with, by its own stack samples: a line of the Dataset's __getitem__
    assert "frame_rows.py:" in data["worker_sites"][0]["where"] and "in the worker processes" in verdict["evidence"]


@pytest.mark.parametrize("script, args, steps", [
    ("vae.py", ["--epochs", "2"], 2 * math.ceil(1500 / 32)),
    ("tabular_mlp.py", ["--epochs", "2", "--rows", "3000"], 2 * math.ceil(3000 / 256)),
])
def test_fit_arm_takes_the_same_steps(script: str, args: list[str], steps: int) -> None:
    """The benchmark's `--fit` arm (launch_bound's action applied) trains the epochs the plain script trains."""
    if script == "tabular_mlp.py":
        pytest.importorskip("pandas", reason="pandas is not installed (pip install -e .[dev] installs it)")
    proc = subprocess.run([sys.executable, str(REALISTIC / script), *args, "--fit"], capture_output=True, text=True,
                          check=True)
    found = re.search(r"trainspeed.fit: cpu:\w+, (\d+) steps", proc.stdout)
    assert found is not None and int(found.group(1)) == steps
    assert len(re.findall(r"epoch \d+: (train )?loss \d+\.\d+", proc.stdout)) == 2  # each epoch's mean loss


def test_sine_lbfgs_fused_is_the_same_model_in_one_layer(tmp_path: Path) -> None:
    """The benchmark's `--fused` arm (launch_bound's fix: the two stacked cells as nn.LSTM(num_layers=2)) trains the
    same model: the cells' weights copied into the layer, so the same test losses up to the last bits of float64."""
    def losses(*extra: str) -> list[float]:
        proc = subprocess.run([sys.executable, str(REALISTIC / "sine_lbfgs.py"), "--steps", "2", "--length", "40",
                               "--future", "20", "--waves", "8", "--max-iter", "3", "--out-dir", str(tmp_path), *extra],
                              capture_output=True, text=True, check=True)
        return [float(x) for x in re.findall(r"test loss: (\S+)", proc.stdout)]

    plain, fused = losses(), losses("--fused")
    assert len(plain) == 2 and fused == pytest.approx(plain, rel=1e-9)


@pytest.mark.parametrize("script, args", [
    ("dcgan.py", ["--epochs", "1", "--images", "128", "--workers", "0"]),
    ("word_lm.py", ["--epochs", "1", "--tokens", "3000"]),
])
def test_bf16_arm_trains_the_same_steps_in_bfloat16(script: str, args: list[str], tmp_path: Path) -> None:
    """The benchmark's `--bf16` arm (the healthy verdict's bf16 autocast) runs the script's loop as given, its products
    in bfloat16: the same printed lines, losses near the float32 run's (a recipe change, not the same bits)."""
    out = ["--outf", str(tmp_path)] if script == "dcgan.py" else ["--save", str(tmp_path / "m.pt")]

    def lines(*extra: str) -> list[str]:
        proc = subprocess.run([sys.executable, str(REALISTIC / script), *args, *out, *extra], capture_output=True,
                              text=True, check=True)
        return [line for line in proc.stdout.splitlines() if "loss" in line.lower()]

    plain, bf16 = lines(), lines("--bf16")
    assert plain and len(bf16) == len(plain) and bf16 != plain
    first = [float(x) for x in re.findall(r"[Ll]oss_?\w*:? +([0-9.]+)", plain[0])]
    near = [float(x) for x in re.findall(r"[Ll]oss_?\w*:? +([0-9.]+)", bf16[0])]
    assert first and near == pytest.approx(first, rel=0.1)


def test_pil_augment_on_batch_augments_as_the_pillow_line_does() -> None:
    """The benchmark's `--augment-on-batch` arm (input_bound's "augment on the device"): each batch rotated by random
    angles within 15 degrees and blurred with torch, where the Pillow line did one sample at a time; the same steps,
    and the epochs' losses near the Pillow run's."""
    import importlib.util

    def losses(*extra: str) -> list[float]:
        proc = subprocess.run([sys.executable, str(REALISTIC / "pil_augment.py"), "--epochs", "2", *extra],
                              capture_output=True, text=True, check=True)
        return [float(x) for x in re.findall(r"epoch \d+: mean loss ([0-9.]+)", proc.stdout)]

    plain, batched = losses(), losses("--augment-on-batch")
    assert len(plain) == len(batched) == 2 and batched == pytest.approx(plain, rel=0.5)
    spec = importlib.util.spec_from_file_location("pil_augment", REALISTIC / "pil_augment.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    argv, sys.argv = sys.argv, ["pil_augment.py"]
    try:
        spec.loader.exec_module(module)
    finally:
        sys.argv = argv
    # a square in the middle of a black image: rotated and blurred it keeps its mass and its place, normalised
    x = torch.zeros(4, 1, 64, 64)
    x[:, :, 24:40, 24:40] = 1.0
    out = module.augment_batch(x, torch.Generator().manual_seed(0))
    assert out.shape == x.shape
    pixels = out * 0.3 + 0.3
    assert pixels.sum(dim=(1, 2, 3)) == pytest.approx(x.sum(dim=(1, 2, 3)), rel=0.05)
    assert not torch.equal(pixels[0], pixels[1])  # each sample its own angle


def test_policy_gradient_settings_keep_the_episodes() -> None:
    """The benchmark's arms for the agent act as the script does: the same sampled actions, so the same episodes."""
    def lengths(*extra: str) -> str:
        proc = subprocess.run([sys.executable, str(REALISTIC / "policy_gradient.py"), "--episodes", "8", *extra],
                              capture_output=True, text=True, check=True)
        found = re.search(r"episode lengths: \[[0-9, ]+\]", proc.stdout)
        assert found is not None
        return found.group(0)

    given = lengths()
    assert lengths("--batched-update") == given and lengths("--no-validate") == given


def test_image_classifier_crops_and_jitters_a_batch_as_each_sample() -> None:
    """The benchmark's `--augment-on-batch` arm (input_bound's "move the augmentation" applied): each image of the
    batch is a crop of its own padded image at offsets within the padding, scaled by its own factor in
    [1 - 0.2, 1 + 0.2], as `RandomCrop` and `Brightness` make one sample; and the arm trains."""
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("image_classifier", REALISTIC / "image_classifier.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    argv, sys.argv = sys.argv, ["image_classifier.py"]
    try:
        spec.loader.exec_module(module)  # main() runs only as __main__
    finally:
        sys.argv = argv
    torch.manual_seed(0)
    images = (torch.rand(1, 1, 32, 32) + 0.5).repeat(16, 1, 1, 1)  # one image: the batch's differences are draws
    out = module.augment_batch(images)
    assert out.shape == images.shape
    padded = torch.nn.functional.pad(images, (4,) * 4)
    for k in range(len(images)):
        found = []
        for top in range(9):
            for left in range(9):
                crop = padded[k, :, top:top + 32, left:left + 32]
                factor = (out[k] / crop.clamp_min(1e-9))[crop > 0]
                if torch.allclose(factor, factor[0].expand_as(factor), rtol=1e-5) and (out[k][crop == 0] == 0).all():
                    found.append(float(factor[0]))
        assert found and all(0.8 - 1e-6 <= f <= 1.2 + 1e-6 for f in found)
    assert len({tuple(o.flatten().tolist()) for o in out}) > 8  # each image its own offsets and factor
    proc = subprocess.run([sys.executable, str(REALISTIC / "image_classifier.py"), "--epochs", "1", "--precompute",
                           "--augment-on-batch"], capture_output=True, text=True, check=True)
    assert re.search(r"epoch 0: loss \d+\.\d+, test accuracy", proc.stdout)


def test_skipgram(capsys: pytest.CaptureFixture[str]) -> None:
    data, _ = _doctor("skipgram.py", ["--steps", "30", "--tokens", "200000"], capsys)
    assert data["steps"]["seen"] == 30 and data["batch_size"] == 1024
    assert _reads(data, 'print(f"step {step}: loss {loss.item():.4f}")', "item") == 1  # step 0's print
    # each step's dense gradients (two 50 000 x 128 tables) and Adam's temporaries of their size are new memory:
    # the warm-up's steps, before the profiler window, take pages afresh (how many the measured steps take depends
    # on where glibc's heap ends, which the doctor's own memory moves)
    assert data["per_step"]["page_faults"] is not None and data["per_step"]["page_faults_early"] > 1000


def test_sequence_cells(capsys: pytest.CaptureFixture[str]) -> None:
    """An nn.LSTMCell stepped over 24 time steps in the model's forward: launch_bound names nn.LSTM, with the loop
    and the fused layer measured on the run's shapes, and predicts from that measurement where it saves more than
    the per-op bound (which said 1.88x where nn.LSTM ran 3.61x faster, on a script of this shape)."""
    steps, length, batch = 60, 24, 32
    data, _ = _doctor("sequence_cells.py", ["--steps", str(steps), "--length", str(length), "--batch-size",
                                            str(batch)], capsys)
    assert data["steps"]["seen"] == steps and data["batch_size"] == batch
    loop = data["cell_loop"]
    assert (loop["kind"], loop["input_size"], loop["hidden_size"], loop["calls_per_step"]) == ("LSTMCell", 16, 64,
                                                                                               length)
    stepped, fused = data["probe"]["cell_loop_ms"]["stepped"], data["probe"]["cell_loop_ms"]["fused"]
    assert stepped > fused > 0
    verdict = first_planted(data, "launch_bound")
    assert verdict["action"].startswith("run the sequence through nn.LSTM(16, 64, batch_first=True) in one call")
    assert f"runs {length} times a step in a Python loop" in verdict["evidence"]
    # the prediction: the fused layer's measured saving, or the per-op bound where that is larger (the rule's own
    # test holds the choice); on this example the two come near each other (quiet runs on the 2-vCPU Zen 4 VM,
    # 2026-11-29: 1.91x to 2.24x from the saving, and once the bound's 2.17x in a run whose median step was 10.4 ms
    # against 6.1 to 8.3), so either may be given
    assert ("the cell loop's measured time replaced by the fused layer's" in verdict["evidence"]
            or "(predicted speed-up is an upper bound)" in verdict["evidence"])


def test_pil_augment(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A Pillow augmentation line in `__getitem__`: the share of the run the doctor gives it (its share of the data
    wait's stack samples times the wait's share) is the line's own time, as the script's clock reads it, within the
    samples' spread - not about double it (a line "about 14% of the run" saved 7% made cheap, on a script of this
    shape; issue 52). The same run, so a busy machine slows both sides alike."""
    times = tmp_path / "times.json"
    data, _ = _doctor("pil_augment.py", ["--epochs", "3", "--times", str(times)], capsys)
    steps = 3 * math.ceil(1500 / 64)
    assert data["steps"]["seen"] == steps and data["batch_size"] == 64
    assert _reads(data, "total += loss.item()", "item") == steps
    # the Pillow line's input_bound first, or second behind the page faults where those predict more: its prediction is
    # the line's own time (1.20x to 1.30x in three runs), the page faults' 1.12x to 1.28x, and their malloc settings
    # measured 1.21x to 1.28x where the line moved to the batch measured 1.07x to 1.16x (BENCHMARKS.md, "Realistic
    # scripts")
    ranked = unloaded_verdicts(data)
    if [v["id"] for v in ranked[:2]] == ["page_faults", "input_bound"]:
        assert ranked[0]["predicted_speedup"] >= ranked[1]["predicted_speedup"]
    else:
        first_planted(data, "input_bound")
    own = json.loads(times.read_text())
    line = next(i for i, text in enumerate((REALISTIC / "pil_augment.py").read_text().splitlines(), 1)
                if "image.rotate(" in text)
    [site] = [d for d in data["data_sites"] if d["where"] == f"{REALISTIC / 'pil_augment.py'}:{line}"]
    assert site["inside"] == "PIL"
    claimed = site["share_of_data"] * data["phases"]["data"]["share"]
    measured = own["augment_s"] / own["loop_s"]
    assert 0.7 * measured <= claimed <= 1.45 * measured, (claimed, measured, site["samples"])
    verdict = next(v for v in data["verdicts"] if v["id"] == "input_bound")
    assert f"pil_augment.py:{line}" in verdict["evidence"]
    # the fix is that line's (a Pillow rotation per sample), not a batch taken whole, which only helps a __getitem__
    # that indexes memory (its short fix said BatchSampler here up to 2026-12-04)
    assert "BatchSampler" not in (verdict["fix"] or "")
    if not loaded(data):  # beside busy processes the evidence gives the line's share of the run less its waits
        assert f"about {claimed:.0%} of the run's time" in verdict["evidence"]


def test_sine_lbfgs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Few long steps (LBFGS, its closure run up to 8 times a step over two LSTMCells stepped in Python, all in
    float64): one warm-up step and one profiled, so a 4-step run has op counts and measured steps; the float64
    arithmetic is named with a prediction, and the figure saved after each step is the line "other" is spent on."""
    steps = 4
    data, _ = _doctor("sine_lbfgs.py", ["--steps", str(steps), "--length", "200", "--future", "200", "--out-dir",
                                        str(tmp_path)], capsys)
    assert data["steps"]["seen"] == steps and data["steps"]["measured"] == steps - 2
    assert any("a run of few long steps" in note for note in data["notes"])
    assert data["per_step"]["ops"] and data["per_step"]["flops"]  # the profiler window ran on step 1
    assert len(list(tmp_path.glob("predict*.png"))) == steps
    assert _reads(data, 'print("test loss:", loss.item())', "item") == steps
    loop = data["cell_loop"]
    assert (loop["kind"], loop["input_size"], loop["hidden_size"]) == ("LSTMCell", 1, 51)
    # lstm2 (51, 51) takes lstm1's output, as often: a stack of two, in the model's float64 (the probe's dtype)
    assert (loop["layers"], loop["dtype"]) == (2, "float64")
    # the first cell's calls over the closure's calls of the model: the sequence's 200 time steps (both cells and
    # every closure call counted said 3200)
    assert loop["passes_per_step"] >= 1 and loop["calls_per_step"] == 200 * loop["passes_per_step"]
    assert data["other_sites"][0]["code"].startswith("plt.savefig(")
    found = {v["id"]: v for v in unloaded_verdicts(data)}
    held = "slow_dtype" in found and (found["slow_dtype"]["predicted_speedup"] or 0) > 1
    launch = found.get("launch_bound")
    if launch is not None and "nn.LSTM(" in launch["fix"]:  # the fused layer advised: the whole stack in one layer
        assert "nn.LSTM(1, 51, num_layers=2, batch_first=True)" in launch["fix"]
    planted_detail(data, held, f"slow_dtype with a prediction among {list(found)}")


def test_word_lm(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An LSTM language model with a hand-written SGD update (steps end at backward) and an `evaluate()` after each
    epoch: each evaluation counted (the `model.eval()` after the last backward of an epoch ends that step first)."""
    epochs, tokens, bptt, batch = 2, 12000, 35, 20
    data, _ = _doctor("word_lm.py", ["--epochs", str(epochs), "--tokens", str(tokens), "--save",
                                     str(tmp_path / "model.pt")], capsys)
    per_epoch = math.ceil((tokens // batch - 1) / bptt)
    val = math.ceil((tokens // 4 // 10 - 1) / bptt)
    assert data["steps"]["seen"] == epochs * per_epoch and data["optimizer"] is None
    assert data["batch_size"] == batch  # the time-first LSTM's second dimension, not the window's 35 time steps
    ev = data["evaluation"]
    assert ev is not None and (ev["in_run"], ev["every_steps"], ev["by"]) == (epochs, per_epoch, "model.eval()")
    assert _reads(data, "total_loss += loss.item()", "item") == epochs * per_epoch
    assert _reads(data, "total_loss += len(data) * criterion(output, targets).item()", "item") == epochs * val
    assert 1 <= data["saves"]["count"] <= epochs  # the first epoch's, and the second's if its loss improved
    assert [v for v in unloaded_verdicts(data)]  # something about the script: its waste, or what bounds the step


def test_dcgan(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A GAN: two optimizers, three backward calls an iteration (the discriminator's real and fake losses, the
    generator's): one step an iteration, one pass (no micro-batches), two optimizer steps."""
    epochs, images, batch = 2, 1024, 64
    data, _ = _doctor("dcgan.py", ["--epochs", str(epochs), "--images", str(images), "--outf", str(tmp_path)], capsys)
    iterations = epochs * math.ceil(images / batch)
    assert data["steps"]["seen"] == iterations and data["batch_size"] == batch
    assert data["per_step"]["micro_batches"] == 1 and data["per_step"]["optimizer_steps"] == 2
    assert _reads(data, "D_x = output.mean().item()", "item") == iterations
    samples = math.ceil(iterations / 10)  # every 10th iteration, and both models at each epoch's end
    assert (data["saves"]["calls"], data["saves"]["count"]) == (samples + 2 * epochs, samples + epochs)
    assert [v for v in unloaded_verdicts(data)]


def test_poly_regression(capsys: pytest.CaptureFixture[str]) -> None:
    """A polynomial fitted until the loss falls under a tolerance (steps end at backward: a hand-written update, no
    optimizer), a fresh batch made in the loop each step: steps as the script counts them, two reads a step, a
    training loop of a few hundred sub-millisecond steps inside a process mostly start-up, and the step's per-op
    cost named."""
    data, err = _doctor("poly_regression.py", ["--seed", "1"], capsys)
    steps = int(re.search(r"^steps (\d+)$", err, re.M).group(1))  # type: ignore[union-attr]
    assert data["steps"]["seen"] == steps and data["optimizer"] is None and data["batch_size"] == 32
    assert _reads(data, "return x.mm(w_target) + b_target.item()", "item") == steps
    assert _reads(data, "loss = output.item()", "item") == steps
    assert data["evaluation"] is None and data["saves"]["count"] == 0
    median_ms = data["steps"]["median_ms"]
    # the loop as run unwatched: about its steps at their median (beside busy processes a sub-millisecond step that
    # waits a time slice for a core pulls the mean above it)
    loop, step_ms = data["process"]["loop_seconds"], max(median_ms, data["steps"]["mean_ms"] or 0.0)
    assert steps * median_ms / 2e3 <= loop <= 4 * steps * step_ms / 1e3 < data["process"]["seconds"]
    found = {v["id"]: v for v in unloaded_verdicts(data)}
    per_op = next((found[i] for i in ("launch_bound", "host_code_heavy") if i in found), None)
    planted_detail(data, per_op is not None and (per_op["predicted_speedup"] or 0) > 1,
                   f"the per-op cost with a prediction among {list(found)}")


def test_the_same_seeded_run_gives_the_same_verdicts(capsys: pytest.CaptureFixture[str]) -> None:
    """The seeded regression twice: the same verdicts about the script (unseeded and seeded runs of a program of this
    shape once named [threads, outside_work] and [threads, launch_bound, small_batch])."""
    if planted.BUSY:
        pytest.skip("beside busy processes two runs' verdicts about the script are not yet held the same (issue 74)")
    first, _ = _doctor("poly_regression.py", ["--seed", "1"], capsys)
    second, _ = _doctor("poly_regression.py", ["--seed", "1"], capsys)
    assert first["steps"]["seen"] == second["steps"]["seen"]
    sets = [{v["id"] for v in unloaded_verdicts(data)} for data in (first, second)]
    if loaded(first) != loaded(second):
        pytest.skip(f"other processes loaded one run and not the other: {sets}")
    planted_detail(first if loaded(first) else second, sets[0] == sets[1], f"the same verdicts: {sets}")
