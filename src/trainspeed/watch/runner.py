"""Run a user's script or module in this process exactly as `python SCRIPT ARGS` would."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from trainspeed.errors import UsageError
from trainspeed.watch.schedule import StopWatching


@dataclass(frozen=True)
class ScriptOutcome:
    """How the script ended: its exit status, and its traceback if it raised."""

    exit_code: int
    error: str | None
    stopped_early: bool
    """True when --steps ended it, or Ctrl-C."""


def check_script(path: str) -> Path:
    """The script path, or a one-line UsageError for a missing file or a directory."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{path} is a directory, not a script")
    if not p.is_file():
        raise UsageError(f"{path}: no such script")
    return p


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)  # what Python itself does with sys.exit("message")
    return 1


def _script_traceback() -> str:
    """The exception being handled, formatted as `python script.py` shows it: from the script's first frame,
    without this runner's and runpy's frames above it."""
    kind, error, tb = sys.exc_info()
    while tb is not None and (tb.tb_frame.f_code.co_filename == __file__
                              or "runpy" in Path(tb.tb_frame.f_code.co_filename).name):  # _run_source's exec too
        tb = tb.tb_next
    return "".join(traceback.format_exception(kind, error, tb))


def _run_source(path: str, text: str, package: str) -> None:
    """What `runpy.run_path(path, run_name="__main__")` does, with `text` in place of the file's (`doctor --fix
    --try`'s patched copy): the same __file__, so the script finds its files as it does unpatched; tracebacks and
    stack samples read the patched lines (linecache)."""
    import linecache
    import types

    code = compile(text, path, "exec")
    linecache.cache[path] = (len(text), None, text.splitlines(keepends=True), path)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __package__=package, __loader__=None, __spec__=None)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved  # the patched lines stay in linecache: the traceback reads them


def module_file(name: str) -> str | None:
    """The source file of module `name` (as `python -m` would run it: a package's __main__), None where none."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            spec = importlib.util.find_spec(f"{name}.__main__")
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin and spec.origin.endswith(".py") else None


def run_target(target: str, args: list[str], module: bool, source: str | None = None) -> ScriptOutcome:
    """Run `target` (a path, or a module name if `module`) as __main__ with `args`; with `source`, that text in
    place of the file's (`_run_source`)."""
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    sys.argv = [target, *args]
    if not sys.path:
        sys.path.append("")
    # python puts the script's folder (or, for -m, the current directory) first on sys.path
    sys.path[0] = os.getcwd() if module else str(Path(target).resolve().parent)
    try:
        if source is not None:
            path = module_file(target) if module else target
            if path is None:
                raise UsageError(f"no source file for module {target}")
            _run_source(path, source, target.rpartition(".")[0] if module else "")
        elif module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
        return ScriptOutcome(0, None, False)
    except StopWatching:
        return ScriptOutcome(0, None, True)
    except SystemExit as e:
        return ScriptOutcome(_exit_code(e), None, False)
    except KeyboardInterrupt:
        return ScriptOutcome(130, None, True)
    except BaseException:
        text = _script_traceback()
        sys.stderr.write(text)
        return ScriptOutcome(1, text, False)
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0
