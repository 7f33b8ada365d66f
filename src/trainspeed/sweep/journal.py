"""The sweep's journal: one JSON line per finished trial, appended as it arrives.

A sweep interrupted part-way is resumed by reading the journal back: trials already recorded
under the same signature (knob, workload, steps, device, ...) are not run again. A line cut
short by the interruption is skipped. Nothing in the file is ever rewritten.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainspeed.sweep.result import Trial


class Journal:
    def __init__(self, path: str | Path, signature: dict[str, Any]) -> None:
        self.path = Path(path)
        self.signature = json.loads(json.dumps(signature, sort_keys=True))

    def _rows(self) -> Iterator[dict[str, Any]]:
        """Every row of the file, of any signature; a line the interruption cut short is skipped."""
        if not self.path.exists():
            return
        with self.path.open(encoding="utf-8") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(row, dict):
                    yield row

    def load(self) -> tuple[list[Trial], dict[str, dict[str, Any]]]:
        """Trials recorded earlier under this signature, and each arm's setup measurements."""
        trials: list[Trial] = []
        setups: dict[str, dict[str, Any]] = {}
        for row in self._rows():
            if row.get("signature") != self.signature:
                continue
            if row.get("kind") == "setup":
                setups[str(row["value"])] = dict(row.get("extras") or {})
            elif row.get("kind") == "trial":
                trials.append(Trial(str(row["value"]), int(row["repeat"]), row.get("seconds"),
                                    str(row.get("error") or ""), dict(row.get("extras") or {})))
        return trials, setups

    def recorded(self) -> tuple[int, bool]:
        """(trials recorded under this signature, whether the file holds rows of another signature: a sweep of
        another configuration, which this one would not resume)."""
        mine, other = 0, False
        for row in self._rows():
            if row.get("signature") == self.signature:
                mine += row.get("kind") == "trial"
            else:
                other = True
        return mine, other

    def _append(self, row: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"signature": self.signature, **row}, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def trial(self, t: Trial) -> None:
        self._append({"kind": "trial", "value": t.value, "repeat": t.repeat, "seconds": t.seconds,
                      "error": t.error, "extras": t.extras})

    def setup(self, value: str, extras: dict[str, Any]) -> None:
        self._append({"kind": "setup", "value": value, "extras": extras})
