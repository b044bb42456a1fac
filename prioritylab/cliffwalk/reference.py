"""Plain NumPy/Python reference of the jitted Blind Cliffwalk learners (no Numba).

It runs the same algorithms with the same seeds and the same random-call
order as :func:`prioritylab.cliffwalk.runner.run`, written independently and
for clarity rather than speed:

* transitions are read from the memory arrays (not from the class table);
* the sum tree is a Python list with the core tree's 4-ary layout and
  left-to-right summation (so totals and draws are bit-identical);
* greedy replay takes ``np.argmax`` of the stored priorities;
* rank-based replay sorts the whole memory by ``(-|delta|, slot)`` at every step;
* the oracle applies every one of the ``N`` transitions' updates to a copy of
  the parameters and recomputes the full squared error.

It serves two purposes: the tests check that the jitted learners equal it
step for step (same MSE after every update, same final parameters), and the
speed benchmark (:mod:`prioritylab.cliffwalk.speed`) measures how much faster
the jitted learners are.
"""

from __future__ import annotations

import numpy as np

from ..samplers.pser import window_from_rho
from ..sumtree import FANOUT, tree_shape
from . import learners as L
from .env import build_memory, discount, q_star
from .runner import RunConfig, RunResult, initial_theta, validate


def power_law_cdf(n: int, alpha: float) -> np.ndarray:
    """Cumulative rank masses ``C[r-1] = 1^-a + 2^-a + ... + r^-a`` for ranks ``1..n`` (PER Section 3.3).

    Written here rather than imported from the jitted structures, so that the tests compare two
    derivations of the rank distribution.  Left-to-right summation, as the jitted loop's table.
    """
    ranks = np.arange(1, n + 1, dtype=np.float64)
    return np.cumsum(np.power(ranks, -float(alpha)))


class PyTree:
    """A sum tree in pure Python with the core tree's layout (``FANOUT``-ary, leaves from ``leaf0``)."""

    def __init__(self, capacity: int, track_min: bool):
        self.depth, self.leaf0, size = tree_shape(capacity)
        self.node = [0.0] * size
        self.track_min = track_min
        self.leaves_written: list[float] = [np.inf] * capacity

    def build(self, masses) -> None:
        for i, m in enumerate(masses):
            self.node[self.leaf0 + i] = float(m)
            self.leaves_written[i] = float(m)
        for parent in range(self.leaf0 - 1, -1, -1):
            s = 0.0
            for j in range(FANOUT):
                s += self.node[parent * FANOUT + 1 + j]
            self.node[parent] = s

    def set(self, i: int, value: float) -> None:
        node = self.leaf0 + i
        self.node[node] = value
        self.leaves_written[i] = value
        while node > 0:
            node = (node - 1) // FANOUT
            s = 0.0
            for j in range(FANOUT):
                s += self.node[node * FANOUT + 1 + j]
            self.node[node] = s

    def min(self) -> float:
        """Smallest positive mass: a zero mass is never drawn, so it does not set PER's IS normaliser."""
        return min((m for m in self.leaves_written if m > 0.0), default=np.inf)

    def mass(self, i: int) -> float:
        return self.node[self.leaf0 + i]

    def sample_one(self, rng: np.random.Generator) -> int:
        v = rng.random() * self.node[0]
        node = 0
        for _ in range(self.depth):
            first = node * FANOUT + 1
            acc = prev = 0.0
            c = 0
            for j in range(FANOUT):
                acc += self.node[first + j]
                if acc <= v:
                    c += 1
                    prev = acc
            if c == FANOUT:
                c = FANOUT - 1
                while self.node[first + c] <= 0.0:
                    c -= 1
                node, v = first + c, self.node[first + c]
            else:
                node, v = first + c, v - prev
        return node - self.leaf0


class Reference:
    """State of one reference run; :meth:`step` performs one replay and update."""

    def __init__(self, cfg: RunConfig, seed):
        validate(cfg)
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)
        self.mem = build_memory(cfg.n, self.rng)
        self.theta = initial_theta(cfg, self.rng)
        self.n = cfg.n
        self.N = self.mem.s_tm1.shape[0]
        self.gamma = discount(cfg.n)
        self.q_star = q_star(cfg.n)
        self.linear = cfg.learner == "linear"
        self.window = window_from_rho(cfg.rho) if cfg.window is None else cfg.window
        self.q = self.values(self.theta)
        # the running maximum starts at 1 (PER Section 3.2); LAP's raw priority is never below kappa
        self.pmax = max(1.0, cfg.kappa) if cfg.scheme == "lap" else 1.0
        self.raw = [0.0] * self.N
        self.tree = None
        if cfg.scheme in ("greedy-td", "per", "per-rank", "pser", "lap"):
            self._init_priorities()
        if cfg.scheme == "per-rank":
            self.cdf = power_law_cdf(self.N, cfg.alpha)

    # -- learner -----------------------------------------------------------
    def values(self, theta) -> np.ndarray:
        n = self.n
        q = np.empty((n, 2))
        for a in range(2):
            for s in range(n):
                q[s, a] = theta[a, s] + theta[a, n] if self.linear else theta[a, s]
        return q

    def td(self, q, i: int) -> float:
        m = self.mem
        y = float(m.r_t[i])
        if not m.done_t[i]:
            s_t = m.s_t[i]
            y += self.gamma * max(q[s_t, 0], q[s_t, 1])
        return y - q[m.s_tm1[i], m.a_tm1[i]]

    def updated(self, theta, i: int, d: float) -> np.ndarray:
        """Parameters after the step ``d`` on transition ``i`` (a copy)."""
        th = theta.copy()
        s, a = self.mem.s_tm1[i], self.mem.a_tm1[i]
        th[a, s] = _flush(th[a, s] + d)
        if self.linear:
            th[a, self.n] = _flush(th[a, self.n] + d)
        return th

    def sse(self, q) -> float:
        total = 0.0
        for s in range(self.n):
            for a in range(2):
                e = q[s, a] - self.q_star[s, a]
                total += e * e
        return total

    # -- priorities --------------------------------------------------------
    def raw_from_td(self, abs_delta: float) -> float:
        sc = self.cfg.scheme
        if sc in ("per", "pser"):
            return abs_delta + self.cfg.eps
        if sc == "lap":
            return max(abs_delta, self.cfg.kappa)
        return abs_delta

    def _init_priorities(self) -> None:
        cfg = self.cfg
        for i in range(self.N):
            if cfg.init == "max":
                p = self.pmax
            elif cfg.init == "small":
                p = self.raw_from_td(0.0)
            else:
                p = self.raw_from_td(abs(self.td(self.q, i)))
            self.raw[i] = p
            self.pmax = max(self.pmax, p)
        if cfg.scheme in ("per", "pser", "lap"):
            self.tree = PyTree(self.N, track_min=cfg.beta > 0.0)
            if cfg.scheme == "pser" and cfg.init == "td":
                self.tree.build([0.0] * self.N)
                for i in range(self.N):
                    self.tree.set(i, self.raw[i] ** cfg.alpha)
                    self._decay(i)
            else:
                self.tree.build([p**cfg.alpha for p in self.raw])

    def _decay(self, t: int) -> None:
        """PSER eq. 6/7 backwards from ``t`` within its episode, at most ``window`` steps."""
        cfg = self.cfg
        decayed = self.raw[t]
        for k in range(1, self.window + 1):
            if t - k < 0 or self.mem.episode_start[t - k + 1]:
                return
            decayed *= cfg.rho
            old = self.raw[t - k]
            new = min(old + decayed, self.pmax) if cfg.mode == "add" else max(decayed, old)
            if new != old:
                self.raw[t - k] = new
                self.tree.set(t - k, new**cfg.alpha)

    def reprioritise(self, i: int, abs_delta: float) -> None:
        """Set slot ``i``'s raw priority from ``|delta|`` (and, for PSER, decay it backwards).

        PSER eq. 10, ``p = max(|delta| + eps, eta p_old)``: ``p_old`` is the raw
        priority stored in slot ``i`` now, including any decay an earlier
        update wrote into it (the library sampler reads it the same way
        inside one batch: item by item, after the earlier items' decays).
        """
        cfg = self.cfg
        p = self.raw_from_td(abs_delta)
        if cfg.scheme == "pser":
            p = max(p, cfg.eta * self.raw[i])
        self.pmax = max(self.pmax, p)
        self.raw[i] = p
        if self.tree is not None:
            self.tree.set(i, p**cfg.alpha)
            if cfg.scheme == "pser":
                self._decay(i)

    # -- replay --------------------------------------------------------------
    def oracle(self) -> int:
        sse = self.sse(self.q)
        best, best_i, big, big_i = np.inf, -1, -1.0, -1
        for i in range(self.N):
            d = self.cfg.lr * self.td(self.q, i)
            new = self.sse(self.values(self.updated(self.theta, i, d)))
            if new < best:
                best, best_i = new, i
            if abs(d) > big:
                big, big_i = abs(d), i
        return big_i if best - sse >= -L.STALL_TOL * sse else best_i

    def draw(self) -> tuple[int, float]:
        cfg = self.cfg
        if cfg.scheme == "uniform":
            return min(int(self.rng.random() * self.N), self.N - 1), 1.0
        if cfg.scheme == "oracle":
            return self.oracle(), 1.0
        if cfg.scheme == "greedy-td":
            return int(np.argmax(self.raw)), 1.0
        if cfg.scheme == "per-rank":
            u = self.rng.random() * self.cdf[self.N - 1]
            r = min(int(np.searchsorted(self.cdf, u, side="right")), self.N - 1)
            order = np.lexsort((np.arange(self.N), -np.asarray(self.raw)))
            w = ((r + 1.0) / self.N) ** (cfg.alpha * cfg.beta) if cfg.beta > 0.0 else 1.0
            return int(order[r]), w
        i = self.tree.sample_one(self.rng)
        w = 1.0
        if cfg.beta > 0.0 and cfg.scheme != "lap":
            w = (self.tree.mass(i) / self.tree.min()) ** (-cfg.beta)
        return i, w

    def step(self) -> None:
        i, w = self.draw()
        delta = self.td(self.q, i)
        self.theta = self.updated(self.theta, i, self.cfg.lr * w * delta)
        self.q = self.values(self.theta)
        if self.cfg.scheme not in ("uniform", "oracle"):
            self.reprioritise(i, abs(self.td(self.q, i) if self.cfg.post_priority else delta))


def _flush(x: float) -> float:
    return x if abs(x) >= L.FLUSH else 0.0


def reference_run(cfg: RunConfig, seed, updates: int | None = None) -> RunResult:
    """Run ``cfg`` with the reference learner.

    Convergence is tested on the exact squared error after every update
    (MSE criterion), or on every ``|Q - Q*| <= 1e-12`` (exact criterion).
    ``updates`` overrides ``cfg.cap`` (for timing a fixed number of updates).
    """
    ref = Reference(cfg, seed)
    cap = cfg.cap if updates is None else updates
    thr = cfg.threshold * 2 * cfg.n
    rec = cfg.record_every
    curve = np.full(-(-cap // rec) + 1 if rec else 0, np.nan)

    def converged() -> bool:
        if cfg.criterion == "exact":
            return bool(np.all(np.abs(ref.q - ref.q_star) <= L.EXACT_TOL))
        return ref.sse(ref.q) < thr

    conv = 0 if converged() else -1
    if rec:
        curve[0] = ref.sse(ref.q) / (2 * cfg.n)
    t = 0
    while t < cap and not (cfg.stop_at_convergence and conv >= 0):
        ref.step()
        t += 1
        if conv < 0 and converged():
            conv = t
        if rec and (t % rec == 0 or (cfg.stop_at_convergence and conv >= 0)):
            curve[(t + rec - 1) // rec] = ref.sse(ref.q) / (2 * cfg.n)
    return RunResult(conv, t, curve, ref.theta)
