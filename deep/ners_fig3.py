"""NERS Fig. 3 (a) and (d): TD3 and SAC on the sparse-reward Pendulum* with uniform, PER and NERS, 10 seeds.

The environment is NERS's Pendulum* (App. A.2): Pendulum with reward 1 only after more than 20 consecutive
upright steps, ``prioritylab/SparsePendulum-v1`` (:mod:`prioritylab.deep.sparse_pendulum`). NERS trains as its
Algorithm 1 (a REINFORCE step at each training episode's end, its replay reward from the training episodes'
returns: the paper's NERS*, Sec. 3.3) with Table B.1's settings; the agents use their
paper settings (256-256 networks, batch 256; 1,000 random steps first, as in NERS Table 3's caption, where
NERS Table B.1's general setting for continuous control has 5,000: a departure, kept for the runs made). The
paper's figure shows means and standard deviations over 5 seeds; its step budget is not given in the text.

- ``reduced``: 60k steps (300 episodes of 200 steps), evaluated every 2,000 steps (10 episodes), one torch
  thread.  Measured here: TD3 with uniform replay (seed 0, 100k steps) scored 0-4.5 at every evaluation up to
  50k steps, took off between 50k and 54k (1.6, 78.5, 150.0) and held 143-157 after, so the earlier 30k budget
  ended before it learned anything.  The final score (mean of the last 10 evaluations, 42k-60k) measures how
  early a sampler's runs take off, which is what Fig. 3's curves compare.  That TD3 run took about 11 minutes
  per 60k steps on one core beside another run; NERS (its scoring network) and SAC take longer per step.
- ``paper``: 100k steps (our choice of horizon), evaluated every 2,000 steps.

    prioritylab sweep deep/ners_fig3.py --budget reduced --seeds 10 --out runs/ners_fig3
    prioritylab report runs/ners_fig3 --out docs/results/ners_fig3
"""

from prioritylab.provenance import as_before

AGENTS = ("td3", "sac")
SAMPLERS = ("uniform", "per", "ners")
SEED_MAJOR = True
CAPACITY = 60_000
"""The replay's slots in the reduced runs: its first runs were recorded when a run shorter than the buffer had
one slot per step (the agents' 1M otherwise), so they overwrote their oldest transitions over their last 298
updates; pinned so that every run of the study has the same replay."""


SAC_SCALED = as_before("log_prob_of")
"""SAC's entropy terms on the action in Pendulum's [-2, 2] range in the reduced runs: they predate the setting
and ran so; pinned so that this specification reproduces them.  The ``paper`` budget takes the default, LAP
eq. 28's squashed action in (-1, 1), with which SAC on [-2, 2] is SAC on NERS's [-1, 1] rescaled."""


CHECKPOINT_EVERY = 10_000
"""Checkpoint every 10k steps (a few MB, under a second) in the reduced runs, so that a run stopped without its
SIGTERM checkpoint loses at most 10k steps, 2-3 minutes; the earlier runs took the agents' 50k.  How often a
run checkpoints does not change what it computes (``prioritylab.provenance.RESUMABLE``)."""


def runs(budget: str) -> list[dict]:
    common = {"env": "prioritylab/SparsePendulum-v1", "start_steps": 1000}
    if budget == "paper":
        common |= {"steps": 100_000, "eval_every": 2000}
    else:
        common |= {"steps": 60_000, "eval_every": 2000, "threads": 1, "buffer_size": CAPACITY,
                   "checkpoint_every": CHECKPOINT_EVERY}
    pinned = {"sac": SAC_SCALED} if budget != "paper" else {}
    return [{**common, **pinned.get(a, {}), "agent": a, "sampler": s} for a in AGENTS for s in SAMPLERS]
