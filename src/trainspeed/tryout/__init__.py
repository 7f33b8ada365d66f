"""`trainspeed doctor --try`: the verdicts' levers applied to the script in runs of their own and timed against
runs without them, alternated (`runs.py`); what each run does in its own process (`arm.py`); the levers themselves
(`levers.py`); the losses each run's script produced (`losses.py`); the measured speed-up and the losses' check
(`judge.py`); the result objects (`result.py`)."""
