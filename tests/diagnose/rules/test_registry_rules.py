"""the registry's ranking on recorded measurements: GPU runs judged without a GPU."""

from __future__ import annotations

from recorded_runs import CTX, recorded

from trainspeed.diagnose.rules import diagnose


def test_predictions_are_capped() -> None:
    r = recorded(100.0, {"data": 99.9}, ops=None)
    assert diagnose(r, CTX)[0].predicted_speedup <= 10.0  # type: ignore[operator]


def test_the_rules_declare_their_probes_each_once() -> None:
    from trainspeed.diagnose.rules import memory
    from trainspeed.diagnose.rules.registry import declared

    probes = declared()
    assert memory.PROBES[0] in probes and len({p.name for p in probes}) == len(probes)
