"""NERS Table 3's setting: SAC on Pendulum-v1, 10k steps after 1,000 random actions; the drawn transitions'
|TD error| and Q-value statistics per sampler (the replay diagnostics of every run).  Run it with 10 seeds
(NERS reports one figure per sampler; 10 seeds give each statistic an interval):

    prioritylab sweep deep/sac_pendulum_table3.py --seeds 10 --out runs/sac_pendulum_table3
    prioritylab report runs/sac_pendulum_table3 --out docs/results/sac_pendulum_table3

Both budgets are the paper's (the table's runs are short); ``reduced`` uses one thread per run.
"""

from prioritylab.provenance import as_before

SAMPLERS = ("uniform", "per", "lap", "ners")
GLOBAL = as_before("replay.normalise")
"""PER's and NERS's IS weights divided by the largest over the whole replay: the committed runs predate the
``replay.normalise`` setting and ran so; pinned so that this specification reproduces them."""


SCALED = as_before("log_prob_of")
"""SAC's entropy terms on the action in Pendulum's [-2, 2] range (``log_prob_of``): the committed runs predate the
setting and ran so; pinned so that this specification reproduces them (LAP eq. 28 and the default take the
squashed action in (-1, 1))."""


CAPACITY = 11_000
"""The replay's slots: the committed runs were recorded when a run shorter than the buffer had one slot per step
(SAC's 1M otherwise), so they overwrote their oldest transitions over their last updates; pinned so that this
specification reproduces them."""


def runs(budget: str) -> list[dict]:
    common = {"agent": "sac", "env": "Pendulum-v1", "steps": 11_000, "start_steps": 1000, "eval_every": 1000,
              **GLOBAL, "buffer_size": CAPACITY, **SCALED}  # fmt: skip
    extra = {"threads": 1} if budget == "reduced" else {}
    return [{**common, **extra, "sampler": s} for s in SAMPLERS]
