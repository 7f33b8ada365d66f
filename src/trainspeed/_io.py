"""Writing results without ever losing what the user had: atomic files, fresh folders."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from trainspeed.errors import UsageError


def _mode_for(target: Path) -> int:
    """The file's mode as it is, or as a new file gets it under this process's umask."""
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def _destination(path: str | os.PathLike[str]) -> Path:
    """Where writing `path` lands: a symbolic link's target (the link stays a link), else the path itself."""
    target = Path(path)
    return target.resolve() if target.is_symlink() else target


def _is_stream(target: Path) -> bool:
    """An existing file that is not a regular one: a named pipe, a terminal, /dev/stdout, a character device. It is
    written to directly (a rename would put a file in its place, and its reader would get nothing)."""
    return target.exists() and not target.is_file() and not target.is_dir()


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write to a temporary file beside `path`, then rename it into place. A symbolic link is written through to its
    target; a pipe or device is written to directly."""
    target = _destination(path)
    mode = "wb" if isinstance(data, bytes) else "w"
    if _is_stream(target):
        try:
            with open(target, mode) as f:
                f.write(data)
        except OSError as e:
            raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
        return target
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    except OSError as e:  # a folder this process may not write in (a read-only file system, say)
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, mode) as f:
            f.write(data)
        os.chmod(tmp, _mode_for(target))  # mkstemp makes the file private (0600); a report is not
        os.replace(tmp, target)
    except OSError as e:  # the disk filled up, the file could not be renamed over
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def check_writable_file(path: str) -> None:
    """Fail early, before any long run, when a result file could not be written: the folder it lands in (a symbolic
    link's target's) is tried for real, with a temporary file made and removed there, as the write will make one
    (permission bits say yes where the file system says no: /proc, a read-only mount)."""
    if path == "-":
        return
    target = _destination(path)
    if target.is_dir():
        raise UsageError(f"{path} is a directory, not a file")
    if _is_stream(target):
        if not os.access(target, os.W_OK):
            raise UsageError(f"cannot write {path}: not writable")
        return
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"cannot write {path}: folder {parent} does not exist")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    os.close(fd)
    Path(probe).unlink(missing_ok=True)


def emit(path: str, text: str) -> None:
    """Write `text` to `path`, or to stdout for "-"."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_atomic(path, text)


def new_run_dir(parent: str | os.PathLike[str], prefix: str) -> Path:
    """Create a new, empty folder under `parent` (never one that already exists)."""
    root = Path(parent)
    if root.exists() and not root.is_dir():
        raise UsageError(f"--out {root} is a file, not a folder")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create --out folder {root}: {e.strerror}") from None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        candidate = root / (f"{prefix}-{stamp}" if n == 1 else f"{prefix}-{stamp}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        except OSError as e:
            raise UsageError(f"cannot create a folder in {root}: {e.strerror}") from None
        return candidate
    raise UsageError(f"could not find a new folder name under {root}")


@contextlib.contextmanager
def quiet_fd2() -> Iterator[None]:
    """Silence file descriptor 2 for a moment: kineto (torch.profiler) writes start/stop lines
    straight to it, past sys.stderr, and they do not belong on the user's terminal."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        yield
        return
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as null:
            sys.stderr.flush()
            os.dup2(null.fileno(), fd)
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, fd)
        os.close(saved)
