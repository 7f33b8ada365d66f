"""The public API is what __all__ says."""

from __future__ import annotations

import trainspeed


def test_all_names_exist() -> None:
    for name in trainspeed.__all__:
        assert hasattr(trainspeed, name), name
    assert trainspeed.__version__
    assert trainspeed.parse_gpu_name("NVIDIA GeForce RTX 4070").generation == 40


def _fresh(code: str) -> str:
    """`code` run in a fresh interpreter (this project's source first on the path); its stdout."""
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(trainspeed.__file__).parents[1])
    done = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {src!r})\n{code}"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_importing_the_package_and_parsing_a_command_line_import_no_torch() -> None:
    # `--help`, `--version` and argument errors answer without torch (about 1 s to import on a CI core)
    out = _fresh("""
import trainspeed
from trainspeed.cli import main
codes = []
for argv in (["--help"], ["sweep", "--help"], ["memory", "--help"], ["explain", "--help"], ["demo", "--epochs", "0"],
             ["doctor", "--steps", "x"]):
    try:
        codes.append(main(argv))
    except SystemExit as e:
        codes.append(e.code)
print("torch" in sys.modules, codes)
""")
    assert out.splitlines()[-1] == "False [0, 0, 0, 0, 2, 2]"


def test_trainspeed_watch_is_callable_whichever_way_it_is_first_imported() -> None:
    for first in ("import trainspeed.watch.syncs", "from trainspeed.watch import Watcher", "import trainspeed",
                  "from trainspeed import watch"):
        out = _fresh(f"""
{first}
import trainspeed
w = trainspeed.watch(warmup=1)
print(type(w).__name__, callable(trainspeed.watch), trainspeed.watch.Watcher.__name__, trainspeed.Watcher.__name__)
""")
        assert out.split() == ["Doctor", "True", "Watcher", "Doctor"], first


def test_the_names_the_command_line_offers_are_the_registries() -> None:
    from trainspeed import names
    from trainspeed.amp import AMP_DTYPES
    from trainspeed.memory.optimizers import OPTIMIZER_NAMES
    from trainspeed.sweep.knobs import KNOBS
    from trainspeed.workloads.catalog import BUILTINS
    from trainspeed.workloads.zoo import ZOO

    assert tuple(ZOO) == names.ZOO_NAMES and tuple(BUILTINS) == names.WORKLOAD_NAMES
    assert OPTIMIZER_NAMES == names.OPTIMIZER_NAMES and list(AMP_DTYPES) == list(names.AMP_NAMES)
    assert {name: knob.summary for name, knob in KNOBS.items()} == names.KNOB_SUMMARIES
    assert list(KNOBS) == list(names.KNOB_SUMMARIES)
