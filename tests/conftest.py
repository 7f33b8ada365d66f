"""Shared test settings: `gpu` tests skip cleanly without CUDA; every other test sees no CUDA.

The tests not marked `gpu` are the CPU paths' tests, written to pass on a machine without a GPU.
On a CUDA machine the code under test would pick the GPU wherever it chooses a device itself
(the examples, `fit`'s automatic device), so those tests see none: `torch.cuda.is_available()`
answers False in this process and CUDA_VISIBLE_DEVICES hides the devices from the processes the
tests start (scripts, torchrun ranks).

Each test also starts with the process's budget of hook resumes unspent (watch/patching.RESUME_BUDGET),
as a script watched by `trainspeed doctor` does, whatever the tests before it used; and with no graph
compiled by torch.compile counted (the profiler window's choice, profile_window.compiled_code_seen),
whatever `fit`'s tests compiled before it. And each test leaves torch's intra-op threads as it found
them: a script a test runs in-process under the doctor (examples/too_many_threads.py) sets them for the
rest of its process, as it would in its own.

`pytest --busy N` runs the session beside N busy processes (`python -c "while True: pass"`, on this process's
cores, under SCHED_OTHER): the machine a user shares (tests/diagnose/busy_processes.py). Where the scheduler shares
the cores with them as groups apart from the session (measured as they start), the planted examples' tests (marker
`planted`) hold their first verdict strictly, as alone: no skip for the load (tests/diagnose/planted.py); where they
share the session's group, a regime the doctor does not yet hold, the tests check as without --busy. The session's
header and summary say which. A test whose planted verdict was missed (`planted.PlantedMiss`, no other failure) is
measured once more (pytest-rerunfailures), and each such miss is listed with its run's verdicts, load and phases at
the session's end: a test fails on two misses in a row.
"""

from __future__ import annotations

from collections.abc import Iterator

import busy_processes
import planted
import pytest
import torch
import verdict_words

from trainspeed.watch import patching


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--busy", type=int, default=0, metavar="N",
                     help="run beside N busy processes on this process's cores; planted verdicts held strictly")


BUSY: busy_processes.Busy | None = None
"""`--busy N`: the session's busy processes, from its start to its end."""


def pytest_configure(config: pytest.Config) -> None:
    """`--busy N`: N busy processes on this process's cores for the whole session, strangers to it (a user's other
    jobs); the planted verdicts held strictly where the scheduler shares the cores with them as groups apart
    (tests/diagnose/busy_processes.py)."""
    global BUSY
    n = config.getoption("busy")
    if n and BUSY is None:
        BUSY = busy_processes.start(n)
        planted.BUSY = n if BUSY.apart else 0


def pytest_unconfigure(config: pytest.Config) -> None:
    global BUSY
    if BUSY is not None:
        BUSY.stop()
        BUSY = None


def pytest_report_header(config: pytest.Config) -> str | None:
    return f"--busy: {BUSY.words()}" if BUSY is not None else None


BUSY_RERUNS = 1
"""Runs more a planted test gets under `--busy` after a PlantedMiss. Each miss seen beside two busy processes in
groups apart from the session came in a run the load stretched several times more than most, a different example
each time: 3 of 273 example runs (seven suite runs of 2026-11-29, BENCHMARKS.md "A busy machine"). Two in a row on
one test, were they independent: about one suite run in 200."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("busy"):
        again = pytest.mark.flaky(reruns=BUSY_RERUNS, only_rerun=[planted.PlantedMiss])
        for item in items:
            if "planted" in item.keywords:
                item.add_marker(again)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


MISSES: list[tuple[str, str]] = []
"""(test, what its run named) for each planted miss that `--busy` measured again."""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.outcome == "rerun" and report.longrepr is not None:
        MISSES.append((report.nodeid, getattr(getattr(report.longrepr, "reprcrash", None), "message", "")
                       or str(report.longrepr).splitlines()[-1]))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if BUSY is not None:
        terminalreporter.write_sep("=", "beside busy processes", yellow=not BUSY.apart)
        terminalreporter.write_line(BUSY.words())
    if not MISSES:
        return
    terminalreporter.write_sep("=", f"planted verdicts missed beside busy processes, measured again: {len(MISSES)}",
                               yellow=True)
    for nodeid, message in MISSES:
        terminalreporter.write_line(f"{nodeid}: {message}")


@pytest.fixture(autouse=True, scope="session")
def _cache_in_the_session_s_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """trainspeed's cache (fit's compile times, the CPU's description) in a folder of the test session's, for the
    processes the tests start too: nothing is written into the user's home, and what one test learnt the next reads."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
        yield


@pytest.fixture(autouse=True)
def _cpu_only_unless_marked_gpu(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if "gpu" in request.keywords:
        return
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(autouse=True)
def _strict_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every doctor report a test builds, in this process or in one it starts, is checked by
    diagnose.invariants: one whose numbers do not add up raises instead of carrying a note."""
    monkeypatch.setenv("TRAINSPEED_STRICT", "1")


@pytest.fixture(autouse=True)
def _fresh_resume_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(patching, "_resumes", [0])


@pytest.fixture(autouse=True)
def _no_compiled_graphs_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._dynamo.utils import counters

    monkeypatch.setitem(counters["stats"], "unique_graphs", 0)


@pytest.fixture(autouse=True)
def _torch_threads_kept() -> Iterator[None]:
    threads = torch.get_num_threads()
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _verdicts_fit_the_short_screen() -> Iterator[None]:
    """Every verdict the rules make during a test fits the doctor's short screen (tests/verdict_words.py)."""
    with verdict_words.watched() as made:
        yield
    found = [line for v in made for line in verdict_words.problems(v)]
    assert not found, "verdicts that do not fit the short screen:\n" + "\n".join(found)
