"""The Blind Cliffwalk testbed (PER, Schaul et al. 2016, Section 3.1 and App. B.1).

* :mod:`~prioritylab.cliffwalk.env`: the environment's pre-filled replay memory and ground truth;
* :mod:`~prioritylab.cliffwalk.learners`: jitted tabular / linear Q-learners and replay schemes;
* :mod:`~prioritylab.cliffwalk.runner`: :class:`RunConfig`, :func:`run`, :func:`run_lr1`;
* :mod:`~prioritylab.cliffwalk.reference`: the plain NumPy reference the kernels are tested against;
* :mod:`~prioritylab.cliffwalk.experiments`: grids over n and seeds, summaries (theory scripts, CLI);
* :mod:`~prioritylab.cliffwalk.speed`: jitted vs reference Q-updates per second.
"""

from .env import Memory, build_memory, discount, memory_size, q_star, right_action, value_iteration
from .runner import RunConfig, RunResult, run, run_lr1

__all__ = [
    "Memory",
    "RunConfig",
    "RunResult",
    "build_memory",
    "discount",
    "memory_size",
    "q_star",
    "right_action",
    "run",
    "run_lr1",
    "value_iteration",
]
