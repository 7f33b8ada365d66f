"""watch/made_at.py: the user's line that made a framework's setting objects, noted as their modules load."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainspeed._after_import import AfterImport
from trainspeed.watch import made_at
from trainspeed.watch.made_at import MadeAt

FAKE = '''
import dataclasses

class Trainer:
    def __init__(self, steps):
        self.steps = steps

@dataclasses.dataclass
class Arguments:
    steps: int = 1

    def __post_init__(self):
        self.steps = max(self.steps, 1)
'''


@pytest.fixture
def fake_framework(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    package = tmp_path / "ts_fake_framework"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "trainer.py").write_text(FAKE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(made_at.WATCHED, "ts_fake_framework.trainer",
                        (("Trainer", "__init__"), ("Arguments", "__post_init__")))
    yield "ts_fake_framework.trainer"
    for name in ("ts_fake_framework.trainer", "ts_fake_framework"):
        sys.modules.pop(name, None)


def test_a_setting_made_after_its_module_loads_is_noted_at_the_users_line(fake_framework: str) -> None:
    watching = MadeAt()
    watching.install()
    try:
        module = importlib.import_module(fake_framework)
        first = module.Trainer(10); line = sys._getframe().f_lineno  # noqa: E702
        module.Trainer(20)  # a second one: the first is the run's
        module.Arguments(steps=3); args_line = sys._getframe().f_lineno  # noqa: E702 - the dataclass's generated __init__ left out
    finally:
        watching.uninstall()
    assert first.steps == 10
    assert watching.sites == {"Trainer": f"{__file__}:{line}", "Arguments": f"{__file__}:{args_line}"}
    assert module.Trainer.__init__.__qualname__ == "Trainer.__init__" and not hasattr(module.Trainer.__init__,
                                                                                        "__wrapped__")
    assert not any(isinstance(f, AfterImport) for f in sys.meta_path)
    assert module.__loader__.get_source(fake_framework) == FAKE  # the real loader's other methods still answer


def test_a_module_loaded_before_watching_is_wrapped_at_once(fake_framework: str) -> None:
    module = importlib.import_module(fake_framework)
    watching = MadeAt()
    watching.install()
    try:
        module.Trainer(1); line = sys._getframe().f_lineno  # noqa: E702
    finally:
        watching.uninstall()
    assert watching.sites == {"Trainer": f"{__file__}:{line}"}


def test_a_framework_carries_its_lines_into_the_report() -> None:
    from trainspeed.watch.frameworks import Framework

    fw = dataclasses.replace(Framework("lightning", "2.6.6"), made_at={"Trainer": "train.py:40"})
    assert fw.made_at == {"Trainer": "train.py:40"}
