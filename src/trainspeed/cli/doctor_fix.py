"""`doctor --fix [PATH]`: where the patch goes (never over a file), the script's text as it ran, the patch made
after the diagnosis, the patched copies `--try` runs, and the patch written once the tries have said which edits
run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from trainspeed._io import check_writable_file, write_atomic
from trainspeed.errors import UsageError

if TYPE_CHECKING:
    from trainspeed.diagnose.tried import Tried
    from trainspeed.diagnose.verdict import Verdict
    from trainspeed.fix.result import Patch
    from trainspeed.tryout.runs import Patched

DEFAULT_NAME = "trainspeed.patch"


class FixRequest:
    """What `--fix` asks, read before the run: the patch's file (PATH, or None: beside the report), the script's
    file and its text as it runs."""

    def __init__(self, args: argparse.Namespace, target: str, module: bool) -> None:
        from trainspeed.watch.runner import module_file

        self.path: str | None = args.fix or None
        if self.path is not None:
            if Path(self.path).exists():
                raise UsageError(f"{self.path} exists: --fix never writes over a file (name a new one)")
            check_writable_file(self.path)
        file = module_file(target) if module else target
        if file is None:
            raise UsageError(f"--fix edits a script file, and module {target} has none")
        self.script = Path(file)
        try:
            self.text = self.script.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--fix cannot read {file}: {e}") from None

    def unchanged(self) -> None:
        """UsageError where the script's file changed while it ran (a patch of it would not apply)."""
        try:
            now = self.script.read_text()
        except (OSError, UnicodeDecodeError):
            now = None
        if now != self.text:
            raise UsageError(f"{self.script} changed while the doctor ran it: no patch written (run it again)")

    def destination(self, args: argparse.Namespace, folder: Path | None) -> Path:
        """PATH, else trainspeed.patch beside the report (the --out folder, the --json or --html file's folder, the
        working folder), numbered where that name is taken."""
        if self.path is not None:
            return Path(self.path)
        beside = next((Path(p).parent for p in (args.json, args.html) if p and p != "-"), None)
        where = folder if folder is not None else beside if beside is not None else Path(".")
        for n in range(1, 1000):
            candidate = where / (DEFAULT_NAME if n == 1 else f"trainspeed-{n}.patch")
            if not candidate.exists():
                return candidate
        raise UsageError(f"{where} holds trainspeed.patch through trainspeed-999.patch: name a PATH for --fix")


def make(request: FixRequest, verdicts: list[Verdict]) -> Patch:
    from trainspeed.fix.plan import make_patch

    return make_patch(verdicts, request.script, request.text)


def patched(patch: Patch) -> dict[str, Patched]:
    """Each hunk as `--try` runs it: the script with that edit alone, named by its lines."""
    from trainspeed.diagnose.verdict import Lever
    from trainspeed.tryout.runs import Patched

    out = {}
    for h in patch.hunks:
        out[h.verdict] = Patched(Lever("patch", {"lines": list(h.lines)}, f"the patch at {patch.label}:{h.span}",
                                       h.same_arithmetic, h.recipe), h.patched)
    return out


def after_tries(request: FixRequest, patch: Patch, verdicts: list[Verdict], tried: Tried | None) -> Patch:
    """The patch less the edits whose patched script failed under --try (said with the script's own error line)."""
    import dataclasses

    from trainspeed.fix.result import Skipped

    failed = {r.verdict: r.failed for r in (tried.rows if tried is not None else [])
              if r.lever.kind == "patch" and r.failed and not r.failed.startswith("not timed")}
    if not failed:
        return patch
    kept = make(request, [v for v in verdicts if v.id not in failed])
    said = [Skipped(v, f"the patched script {reason}") for v, reason in failed.items()]  # "failed: <its error>"
    return dataclasses.replace(kept, skipped=kept.skipped + said)


def write(patch: Patch, path: Path) -> Patch:
    """The patch's diff written to `path` (atomically), where it has a hunk."""
    import dataclasses

    if not patch.diff:
        return patch
    write_atomic(path, patch.diff)
    return dataclasses.replace(patch, written=str(path))
