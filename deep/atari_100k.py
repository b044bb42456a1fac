"""The Atari 100k regime in one queue: Double DQN with uniform, PER, LAP and PAL (``lap_atari.py``) and DQN with
PER and PSER (``pser_atari.py``), game by game, so that with ``--jobs 2`` every run of the first game finishes
before the second game starts.

``reduced`` is the two specifications' ``reduced`` presets unchanged (100k agent steps = 400k frames, their
scaled schedules); ``paper`` is their ``paper`` budgets.  Runs share the folder layout of the two specifications,
so a run started by either is picked up (skipped or resumed) here.

    prioritylab sweep deep/atari_100k.py --budget reduced --seeds 1 --jobs 2 --out runs/atari_100k
"""

from pathlib import Path

from prioritylab.harness.sweep import load_spec

HERE = Path(__file__).resolve().parent


def runs(budget: str) -> list[dict]:
    both = load_spec(HERE / "lap_atari.py", budget) + load_spec(HERE / "pser_atari.py", budget)
    games = list(dict.fromkeys(run["env"] for run in both))  # first-seen order: Pong before RoadRunner
    return sorted(both, key=lambda run: games.index(run["env"]))  # stable: the agents keep their order
