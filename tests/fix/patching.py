"""Scripts as users write them, patched by `doctor --fix`'s planner (`fix.plan.make_patch`) for a verdict built as
the rules build it: the patch, and the patched text checked to compile."""

from __future__ import annotations

import textwrap
from pathlib import Path

from trainspeed.diagnose.verdict import Lever, Verdict
from trainspeed.fix.plan import make_patch
from trainspeed.fix.result import Patch


def verdict(id_: str, fix: str = "", site: str | None = None, lever: Lever | None = None,
            evidence: str = "e", action: str = "a") -> Verdict:
    return Verdict(id_, evidence, action, 1.5, lever, site, fix=fix)


def patch_of(tmp_path: Path, source: str, *verdicts: Verdict, name: str = "train.py") -> tuple[Patch, Path]:
    script = tmp_path / name
    script.write_text(textwrap.dedent(source).lstrip())
    return make_patch(list(verdicts), script, script.read_text()), script


def only_hunk(patch: Patch) -> str:
    """The patched text of the patch's one hunk (which must compile)."""
    assert len(patch.hunks) == 1, (patch.hunks, patch.skipped)
    text = patch.hunks[0].patched
    compile(text, "patched", "exec")
    return text


def reason(patch: Patch) -> str:
    assert not patch.hunks and len(patch.skipped) == 1, (patch.hunks, patch.skipped)
    return patch.skipped[0].reason
