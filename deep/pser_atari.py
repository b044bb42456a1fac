"""PSER vs PER with DQN on Atari (PSER Section 5 and appendix Table 4, the Dopamine settings).

Paper budget: DQN (Nature network, RMSProp 2.5e-4, batch 32) with PER and with PSER (W 5, rho 0.4,
eta 0.7, MAX) for 200M frames (PSER Sections 4.1 and 5: "the full 200M frames", 50M agent steps); the
seed count is not given there; human-normalised scores as its Table 5 (``prioritylab report`` computes
them with the appendix's human and random scores).  ``paper`` here runs an 8-game selection of ours
(``PAPER_GAMES``) at that budget.

``reduced`` (fits a 2-core machine): Pong and RoadRunner, 100k agent steps (400k frames), DQN's
schedules scaled to that budget: 5k random steps (Table 4: 12.5k), epsilon decay over 6,250 updates,
target sync every 625 updates (Table 4's value), evaluation every 10k steps, a replay of 100k
transitions, one torch thread.

Why RoadRunner and not Breakout: an untrained greedy policy in Breakout rarely presses FIRE, so
each evaluation episode runs towards the 27k-step truncation (eval epsilon 0.001), and one
evaluation of 10 episodes took several minutes; RoadRunner's episodes end within a few hundred steps
until the agent learns, and agents learn it within 100k steps (the Atari 100k benchmark).
In docs/results/atari_100k, DQN with this schedule reached 1,730 (per) and 2,580 (pser) at 100k
steps on seed 0; on seed 1 it peaked at 80k-90k (per 2,860, pser 1,200) and ended at 0 and 490.

    prioritylab sweep deep/pser_atari.py --budget reduced --seeds 2 --out runs/dqn_atari_reduced
"""

from prioritylab.provenance import as_before

SAMPLERS = ("per", "pser")
PAPER_GAMES = ("ALE/Alien-v5", "ALE/Asterix-v5", "ALE/BeamRider-v5", "ALE/Breakout-v5", "ALE/Pong-v5",
               "ALE/Qbert-v5", "ALE/Seaquest-v5", "ALE/SpaceInvaders-v5")  # fmt: skip
REDUCED_GAMES = ("ALE/Pong-v5", "ALE/RoadRunner-v5")
REDUCED = {"steps": 100_000, "start_steps": 5_000, "eps_decay": 6_250, "eval_every": 10_000,
           "buffer_size": 100_000, "checkpoint_every": 25_000, "threads": 1,
           **as_before("replay.normalise")}  # fmt: skip
# the committed runs (docs/results/atari_100k) predate the replay.normalise setting and divided PER's and PSER's IS
# weights by the largest over the whole replay; pinned so that this preset reproduces them
PSER_EACH = as_before("replay.duplicates")
"""PSER's runs of the reduced preset predate the setting and applied eq. 10 once per drawn copy of a slot (a slot
drawn twice in a minibatch went to eta^2 p_old); pinned so that this preset reproduces them.  The ``paper``
budget takes the default, one update per slot."""


def runs(budget: str) -> list[dict]:
    if budget == "paper":
        return [{"agent": "dqn", "env": g, "sampler": s, "steps": 50_000_000} for g in PAPER_GAMES for s in SAMPLERS]
    return [{"agent": "dqn", "env": g, "sampler": s, **REDUCED, **(PSER_EACH if s == "pser" else {})}
            for g in REDUCED_GAMES for s in SAMPLERS]  # fmt: skip
