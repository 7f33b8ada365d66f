from trainspeed.sweep.journal import Journal
from trainspeed.sweep.result import Trial


def test_journal_round_trip_keeps_only_its_own_signature(tmp_path):
    path = tmp_path / "trials.jsonl"
    a = Journal(path, {"knob": "threads", "steps": 10})
    a.setup("1", {"first_step_s": 0.5})
    a.trial(Trial("1", 0, 0.25, "", {"reads": 3}))
    a.trial(Trial("2", 0, None, "out of memory: x"))
    Journal(path, {"knob": "threads", "steps": 20}).trial(Trial("1", 0, 9.0))  # another sweep, same file
    with path.open("a") as f:
        f.write('{"signature": {"knob": "thre')  # a line cut short by an interruption
    trials, setups = Journal(path, {"steps": 10, "knob": "threads"}).load()
    assert [(t.value, t.repeat, t.seconds, t.ok) for t in trials] == [("1", 0, 0.25, True), ("2", 0, None, False)]
    assert trials[0].extras == {"reads": 3}
    assert trials[1].error == "out of memory: x"
    assert setups == {"1": {"first_step_s": 0.5}}


def test_missing_journal_is_empty(tmp_path):
    assert Journal(tmp_path / "none.jsonl", {}).load() == ([], {})
