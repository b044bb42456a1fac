"""LAP/PAL Table 2: Double DQN on Atari with uniform, PER, LAP and PAL (LAP/PAL App. D.2, Table 7).

Paper budget (App. D.2): 10 games, evaluations every 50k steps; the text gives no training length, and
50M frames (12.5M agent steps) each is ours, the common Atari budget of its Fig. 2's era;
Table 2 reports mean and median % gains over DDQN and DDQN + PER (``prioritylab report`` builds the
same tables from the run folders).  The text does not name the 10 games (they appear only in its
Fig. 2); ``paper`` here runs a 10-game selection of ours (``PAPER_GAMES``), not the paper's, and without
Asterix, on which the authors tuned LAP's and PAL's alpha and which they "excluded from the final results"
(App. D.2).

``reduced`` (fits a 2-core machine; 34-41 minutes a Pong run, two at once): Pong and RoadRunner, 100k agent
steps (400k frames), with Table 7's schedules scaled to that budget and labelled as such:
5k random steps (Table 7: 20k), epsilon 1 -> 0.01 over 6,250 updates (25k steps; Table 7: 250k
updates), a target sync every 2,000 updates (Table 7: 8k), evaluation every 10k steps, a replay of
100k transitions, one torch thread, checkpoints every 25k steps.

Why RoadRunner and not Breakout: an untrained greedy policy in Breakout rarely presses FIRE, so
each evaluation episode runs towards the 27k-step truncation (eval epsilon 0.001), and one
evaluation of 10 episodes took several minutes; RoadRunner's episodes end within a few hundred steps
until the agent learns, and agents learn it within 100k steps (the Atari 100k benchmark).
In docs/results/atari_100k, Double DQN with this schedule showed no learning: its scores jumped
between 0 and about 1,000, which a near-constant policy also scores.

    prioritylab sweep deep/lap_atari.py --budget reduced --seeds 2 --out runs/ddqn_atari_reduced
"""

from prioritylab.provenance import as_before

SAMPLERS = ("uniform", "per", "lap", "pal")
PAPER_GAMES = ("ALE/Alien-v5", "ALE/RoadRunner-v5", "ALE/BeamRider-v5", "ALE/Breakout-v5", "ALE/Enduro-v5",
               "ALE/Pong-v5", "ALE/Qbert-v5", "ALE/Seaquest-v5", "ALE/SpaceInvaders-v5", "ALE/MsPacman-v5")  # fmt: skip
REDUCED_GAMES = ("ALE/Pong-v5", "ALE/RoadRunner-v5")
ATARI_100K = {"steps": 100_000, "start_steps": 5_000, "eps_decay": 6_250, "eval_every": 10_000,
              "buffer_size": 100_000, "checkpoint_every": 25_000, "threads": 1,
              **as_before("replay.normalise")}  # fmt: skip
"""The reduced preset's settings shared with ``pser_atari.py`` (which reads them from here).  The committed runs
(docs/results/atari_100k) predate the replay.normalise setting and divided PER's and PSER's IS weights by the
largest over the whole replay; pinned so that this preset reproduces them."""
REDUCED = {**ATARI_100K, "target_every": 2_000}  # Table 7's 8k scaled as its other schedules


def runs(budget: str) -> list[dict]:
    if budget == "paper":
        return [{"agent": "ddqn", "env": g, "sampler": s, "steps": 12_500_000, "eval_every": 50_000}
                for g in PAPER_GAMES for s in SAMPLERS]  # fmt: skip
    return [{"agent": "ddqn", "env": g, "sampler": s, **REDUCED} for g in REDUCED_GAMES for s in SAMPLERS]
