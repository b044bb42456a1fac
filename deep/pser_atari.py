"""PSER vs PER with DQN on Atari (PSER Section 5 and appendix Table 4, the Dopamine settings).

Paper budget: DQN (Nature network, RMSProp 2.5e-4, batch 32) with PER and with PSER (W 5, rho 0.4,
eta 0.7, MAX) for 200M frames (PSER Sections 4.2 and 5.4: "the full 200M frames", 50M agent steps); the
seed count is not given there; human-normalised scores as its Table 5 (``prioritylab report`` computes
them with the appendix's human and random scores).  ``paper`` here runs an 8-game selection of ours
(``PAPER_GAMES``) at that budget.

``reduced`` (fits a 2-core machine): ``lap_atari.py``'s games and its preset but for the target period,
which stays Table 4's (a sync every 625 updates): Pong and RoadRunner (``lap_atari.py`` says why not
Breakout), 100k agent steps (400k frames), 5k random steps (Table 4: 12.5k), epsilon decay over 6,250
updates, evaluation every 10k steps, a replay of 100k transitions, one torch thread.
In docs/results/atari_100k, DQN with this schedule reached 1,730 (per) and 2,580 (pser) at 100k
steps on seed 0; on seed 1 it peaked at 80k-90k (per 2,860, pser 1,200) and ended at 0 and 490.

    prioritylab sweep deep/pser_atari.py --budget reduced --seeds 2 --out runs/dqn_atari_reduced
"""

from pathlib import Path

from prioritylab.harness.sweep import load_module
from prioritylab.provenance import as_before

LAP_ATARI = load_module(Path(__file__).resolve().parent / "lap_atari.py")
SAMPLERS = ("per", "pser")
PAPER_GAMES = ("ALE/Alien-v5", "ALE/Asterix-v5", "ALE/BeamRider-v5", "ALE/Breakout-v5", "ALE/Pong-v5",
               "ALE/Qbert-v5", "ALE/Seaquest-v5", "ALE/SpaceInvaders-v5")  # fmt: skip
REDUCED_GAMES = LAP_ATARI.REDUCED_GAMES
REDUCED = LAP_ATARI.ATARI_100K  # DQN's own target period (Table 4) where Double DQN's is scaled
PSER_EACH = as_before("replay.duplicates")
"""PSER's runs of the reduced preset predate the setting and applied eq. 10 once per drawn copy of a slot (a slot
drawn twice in a minibatch went to eta^2 p_old); pinned so that this preset reproduces them.  The ``paper``
budget takes the default, one update per slot."""


def runs(budget: str) -> list[dict]:
    if budget == "paper":
        return [{"agent": "dqn", "env": g, "sampler": s, "steps": 50_000_000} for g in PAPER_GAMES for s in SAMPLERS]
    return [{"agent": "dqn", "env": g, "sampler": s, **REDUCED, **(PSER_EACH if s == "pser" else {})}
            for g in REDUCED_GAMES for s in SAMPLERS]  # fmt: skip
