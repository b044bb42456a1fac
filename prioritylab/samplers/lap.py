"""Loss-Adjusted Prioritised replay (Fujimoto, Meger & Precup, 2020).

Priority ``max(|delta|^alpha, kappa^alpha)`` (eq. 9 for kappa = 1, eq. 30 in
general), no IS weights; pair it with the Huber(kappa) loss (eq. 29).  The raw
priority is ``max(|delta|, kappa)`` and the tree stores ``raw^alpha``, which
equals eq. 30 for alpha >= 0.  Defaults: alpha = 0.4, kappa = 1 (Table 6 and eq. 9, the TD3
setting; the Double DQN setting is alpha = 0.6, Table 7, with kappa = 0.01, App. D.2).
"""

from __future__ import annotations

import numpy as np

from .._checks import check_range
from ..priorities import LAP
from .priority import PrioritySampler


class LAPSampler(PrioritySampler):
    name = "lap"
    _rule = LAP

    def __init__(self, capacity: int, alpha: float = 0.4, kappa: float = 1.0, seed=None, **kwargs):
        self.kappa = check_range("kappa", kappa, 0.0, np.inf, lo_open=True, hi_open=True)
        # New items start at the max priority: 1 as in PER, but never below LAP's floor kappa.
        kwargs.setdefault("initial_priority", max(1.0, self.kappa))
        super().__init__(capacity, alpha, seed, **kwargs)
        if self.initial_priority < self.kappa:  # a priority LAP's rule could never give
            raise ValueError(f"initial_priority={self.initial_priority} is below kappa={self.kappa}, LAP's least "
                             "priority max(|delta|, kappa); give one of at least kappa")  # fmt: skip
        self._rule_param = self.kappa
        self._least_priority, self._least_priority_named = self.kappa, f"kappa={self.kappa}"

    def config(self) -> dict:
        return {**super().config(), "kappa": self.kappa}
