"""Run Blind Cliffwalk learners: one settings dataclass, seeded runs, the learning-rate-1 runs.

Seeding and random-call order (shared with :mod:`prioritylab.cliffwalk.reference`):
``rng = np.random.default_rng(seed)``; the memory is built with it
(:func:`~prioritylab.cliffwalk.env.build_memory`, one permutation); then, for
``q0="normal"``, the parameters are drawn ``rng.normal(0, init_std, (2, F))``;
then the same ``rng`` drives the jitted replay.  Runs with equal seeds but
different schemes therefore share the memory order and the initial
parameters.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .._checks import check_positive_int, check_range
from ..priorities import sequential_links
from ..samplers import pser as PSER
from ..samplers.pser import window_from_rho
from ..sumtree import tree_shape
from . import learners as L
from .env import build_memory, discount, q_star
from .structures import argmax_tree_size, rank_cdf, treap_nodes

SCHEMES = {
    "uniform": L.UNIFORM,
    "oracle": L.ORACLE,
    "greedy-td": L.GREEDY,
    "per": L.PER,
    "per-rank": L.RANK,
    "pser": L.PSER,
    "lap": L.LAP,
}
"""Scheme names (the library's sampler names plus ``oracle``) and their kernel codes."""

SCHEME_READS = {
    "uniform": (), "oracle": (), "greedy-td": ("init",), "per": ("alpha", "beta", "eps", "init"),
    "per-rank": ("alpha", "beta", "init"), "pser": ("alpha", "beta", "eps", "init", "rho", "window", "eta", "mode"),
    "lap": ("alpha", "kappa", "init"),
}  # fmt: skip
"""The replay settings of :class:`RunConfig` each scheme uses (LAP takes no IS weights, so no beta)."""

INITS = {"max": L.INIT_MAX, "small": L.INIT_SMALL, "td": L.INIT_TD}
LEARNERS = ("tabular", "linear")


@dataclass(frozen=True)
class RunConfig:
    """Settings of one Blind Cliffwalk experiment (defaults: PER App. B.1 unless said)."""

    n: int = 16
    """Number of states (PER varies it from 2 to 16)."""
    learner: str = "tabular"
    """``tabular`` or ``linear`` (1-hot state + bias feature, one weight vector per action; PER App. B.1)."""
    scheme: str = "uniform"
    """Replay scheme, one of :data:`SCHEMES`."""
    alpha: float = 0.7
    """Prioritisation exponent (PER eq. 1); the default is PER's rank-based Atari value."""
    beta: float = 0.0
    """IS exponent (PER Section 3.4), constant; 0 = no correction, the reading used for PER Fig. 2."""
    eps: float = 1e-6
    """Small constant of the proportional priority ``|delta| + eps`` (PER Section 3.3)."""
    init: str = "max"
    """Initial priority of the pre-filled memory: ``max`` (:func:`initial_max_priority`: 1, LAP max(1, kappa)),
    ``small`` (zero TD error's priority), ``td``."""
    rho: float = PSER.RHO
    """PSER decay coefficient (PSER App. table: 0.4)."""
    window: int | None = None
    """PSER window; ``None``: ``floor(ln 0.01 / ln rho)`` (PSER eq. 8-9; 5 for rho = 0.4)."""
    eta: float = PSER.ETA
    """PSER anti-collapse coefficient (eq. 10; PSER App. table: 0.7)."""
    mode: str = PSER.MODE
    """PSER decay variant: ``max`` (eq. 6) or ``add`` (eq. 7)."""
    kappa: float = 1.0
    """LAP's priority floor (LAP eq. 9: 1)."""
    lr: float = 0.25
    """Step size (PER App. B.1: 1/4; PSER Theorem 1: 1)."""
    q0: str = "normal"
    """Initial parameters: ``normal`` (each ~ N(0, init_std), PER App. B.1) or ``zeros`` (PSER Theorem 1)."""
    init_std: float = 0.1
    """Standard deviation of the initial parameters (PER App. B.1 writes N(0, 0.1); read as the std)."""
    threshold: float = 1e-3
    """Convergence: MSE over all 2n state-action pairs below this (PER App. B.1: 10^-3)."""
    criterion: str = "mse"
    """``mse`` (PER) or ``exact``: every ``|Q - Q*| <= 1e-12`` (tabular; PSER Theorem 1's Q-intervals)."""
    post_priority: bool = False
    """Set a replayed transition's priority from the TD error after its update (Theorem 1's model)."""
    cap: int = 20_000_000
    """Largest number of updates; a run still above the threshold is reported as censored."""
    record_every: int = 0
    """Record the MSE every this many updates (PSER: 100); 0 records nothing."""
    stop_at_convergence: bool = True
    """Stop at convergence (else run ``cap`` updates, e.g. for MSE curves)."""
    diagnostics: bool = False
    """Accumulate the replay diagnostics (:data:`DIAGNOSTICS`) in the loop.  Off unless asked: they add
    about a tenth to an update of uniform or proportional replay, a seventh with IS weights (cache
    misses on a random slot's counters; docs/benchmarks.md), and off they are NaN.  The theory scripts
    (:func:`prioritylab.cliffwalk.experiments.run_script`) and ``prioritylab cliffwalk`` turn them on
    because they report them."""

    def replace(self, **changes) -> RunConfig:
        return dataclasses.replace(self, **changes)


@dataclass
class RunResult:
    """Outcome of one seeded run."""

    updates: int
    """Updates until convergence, or ``-1`` if censored."""
    steps: int
    """Updates performed."""
    curve: np.ndarray
    """MSE after ``0, record_every, 2 record_every, ...`` updates (empty without recording)."""
    theta: np.ndarray
    """Final parameters."""
    diagnostics: dict = dataclasses.field(default_factory=dict)
    """Replay diagnostics over the run's updates (:data:`DIAGNOSTICS`)."""

    @property
    def censored(self) -> bool:
        return self.updates < 0


def unread(cfg: RunConfig) -> list[tuple[str, object, tuple[str, ...]]]:
    """``(setting, value, schemes that read it)`` for each replay setting away from its default that ``cfg``'s
    scheme does not use (:data:`SCHEME_READS`)."""
    default = RunConfig()
    settings_ = sorted({k for reads in SCHEME_READS.values() for k in reads})
    return [(k, getattr(cfg, k), tuple(s for s, reads in SCHEME_READS.items() if k in reads)) for k in settings_
            if getattr(cfg, k) != getattr(default, k) and k not in SCHEME_READS[cfg.scheme]]


def validate(cfg: RunConfig, names: dict[str, str] | None = None) -> None:
    """Raise ``ValueError`` naming the first bad setting: by its field, or by ``names[field]`` where given (the
    options of a command line, such as ``--init-std`` for ``init_std``)."""
    from .env import MAX_STATES

    def name(field: str) -> str:
        return field if names is None else names.get(field, field)

    if isinstance(cfg.n, bool) or not isinstance(cfg.n, (int, np.integer)) or not 1 <= cfg.n <= MAX_STATES:
        raise ValueError(f"{name('n')} must be an integer in [1, {MAX_STATES}], got {cfg.n!r}")
    if cfg.learner not in LEARNERS:
        raise ValueError(f"{name('learner')} must be one of {LEARNERS}, got {cfg.learner!r}")
    if cfg.scheme not in SCHEMES:
        raise ValueError(f"{name('scheme')} must be one of {sorted(SCHEMES)}, got {cfg.scheme!r}")
    if cfg.init not in INITS:
        raise ValueError(f"{name('init')} must be one of {sorted(INITS)}, got {cfg.init!r}")
    if cfg.mode not in ("max", "add"):
        raise ValueError(f"{name('mode')} must be 'max' or 'add', got {cfg.mode!r}")
    if cfg.q0 not in ("normal", "zeros"):
        raise ValueError(f"{name('q0')} must be 'normal' or 'zeros', got {cfg.q0!r}")
    if cfg.criterion not in ("mse", "exact"):
        raise ValueError(f"{name('criterion')} must be 'mse' or 'exact', got {cfg.criterion!r}")
    if cfg.criterion == "exact" and cfg.learner != "tabular":
        raise ValueError(f"{name('criterion')}='exact' needs {name('learner')}='tabular'")
    check_range(name("alpha"), cfg.alpha, 0.0, np.inf, hi_open=True)
    check_range(name("beta"), cfg.beta, 0.0, 1.0)
    check_range(name("eps"), cfg.eps, 0.0, np.inf, hi_open=True)
    check_range(name("rho"), cfg.rho, 0.0, 1.0, lo_open=True, hi_open=True)
    check_range(name("eta"), cfg.eta, 0.0, 1.0)
    check_range(name("kappa"), cfg.kappa, 0.0, np.inf, lo_open=True, hi_open=True)
    check_range(name("lr"), cfg.lr, 0.0, np.inf, lo_open=True, hi_open=True)
    check_range(name("init_std"), cfg.init_std, 0.0, np.inf, hi_open=True)
    check_range(name("threshold"), cfg.threshold, 0.0, np.inf, lo_open=True)
    check_positive_int(name("cap"), cfg.cap)
    if cfg.window is not None:
        check_positive_int(name("window"), cfg.window)
    if isinstance(cfg.record_every, bool) or not isinstance(cfg.record_every, (int, np.integer)):
        raise ValueError(f"{name('record_every')} must be a non-negative integer, got {cfg.record_every!r}")
    if cfg.record_every < 0:
        raise ValueError(f"{name('record_every')} must be a non-negative integer, got {cfg.record_every!r}")
    if cfg.scheme in ("per", "pser") and cfg.eps == 0.0 and cfg.init != "max":
        raise ValueError(f"{name('eps')} = 0 with {name('init')} 'small' or 'td' can leave no priority mass to "
                         "sample from")  # fmt: skip


def settings(cfg: RunConfig) -> L.Settings:
    """The jitted kernel's view of ``cfg`` (types fixed so one compilation serves all runs)."""
    window = window_from_rho(cfg.rho) if cfg.window is None else int(cfg.window)
    return L.Settings(
        linear=cfg.learner == "linear", lr=float(cfg.lr), gamma=float(discount(cfg.n)), scheme=SCHEMES[cfg.scheme],
        alpha=float(cfg.alpha), beta=float(cfg.beta), eps=float(cfg.eps), init=INITS[cfg.init],
        rho=float(cfg.rho), window=window, eta=float(cfg.eta), add_mode=cfg.mode == "add",
        kappa=float(cfg.kappa), post_priority=bool(cfg.post_priority), threshold=float(cfg.threshold),
        exact=cfg.criterion == "exact", cap=int(cfg.cap), record_every=int(cfg.record_every),
        stop=bool(cfg.stop_at_convergence), diagnostics=bool(cfg.diagnostics),
    )  # fmt: skip


def initial_theta(cfg: RunConfig, rng: np.random.Generator) -> np.ndarray:
    """Initial parameters, shape ``(2, n)`` tabular or ``(2, n + 1)`` linear (draws only for ``normal``)."""
    width = cfg.n + (cfg.learner == "linear")
    if cfg.q0 == "zeros":
        return np.zeros((2, width))
    return rng.normal(0.0, cfg.init_std, size=(2, width))


def initial_max_priority(cfg: RunConfig) -> float:
    """Largest raw priority before any is recorded: 1, and ``max(1, kappa)`` for LAP.

    PER Section 3.2 gives new transitions the maximal priority so far, 1 at
    the start (the library samplers' ``initial_priority``).  LAP's raw
    priority is never below ``kappa`` (eq. 9/30: ``max(|delta|, kappa)``), so
    its running maximum starts at ``max(1, kappa)``: with ``kappa > 1`` a new
    item would otherwise sit below the floor every replayed item has.
    """
    return max(1.0, float(cfg.kappa)) if cfg.scheme == "lap" else 1.0


def slot_dtype(cap: int):
    """Per-slot replay counters hold at most ``cap``: 32-bit when that fits.  They are read and written at a
    random slot every update, so their size decides the cache misses the diagnostics add (at n = 16, 1 MB
    instead of 2 MB; docs/benchmarks.md)."""
    return np.int32 if cap <= np.iinfo(np.int32).max else np.int64


def allocate(cfg: RunConfig, memory) -> L.ReplayArrays:
    """Empty replay state for ``cfg.scheme`` (arrays a scheme does not use have length 0)."""
    N = memory.s_tm1.shape[0]
    code = SCHEMES[cfg.scheme]
    tree_based = code in (L.PER, L.PSER, L.LAP)
    depth, leaf0, size = tree_shape(N) if tree_based else (0, 0, 0)
    track = tree_based and cfg.beta > 0.0 and code != L.LAP
    leaves = argmax_tree_size(N) if code == L.GREEDY else 0
    nr = N if code == L.RANK else 0
    return L.ReplayArrays(
        raw=np.zeros(N), tree=np.zeros(size),
        tmin=np.full(size, np.inf) if track else np.empty(0), tmax=np.empty(0),
        leaf0=int(leaf0), depth=int(depth),
        **dict(zip(("generation", "prev", "prev_gen"), sequential_links(memory.episode_start), strict=True)),
        live=np.ones(N, dtype=np.bool_),
        best=np.zeros(2 * leaves, dtype=np.int64), leaves=int(leaves),
        nodes=treap_nodes(nr), root=np.full(1, -1, dtype=np.int64),
        cdf=rank_cdf(N, cfg.alpha) if nr else np.empty(0), pmax=np.full(1, initial_max_priority(cfg)),
        slot_stats=np.zeros((N, 2) if cfg.diagnostics else (0, 2), dtype=slot_dtype(cfg.cap)),
        ages=np.zeros(L.AGE_BINS, dtype=np.int64), wsum=np.zeros(2),
    )  # fmt: skip


DIAGNOSTICS = ("ess_fraction", "weight_mean", "age_median", "age_p90", "coverage", "max_replays")
"""Replay diagnostics of a run (docs/diagnostics.md, "Testbed"), over all its updates."""


def age_quantile(hist: np.ndarray, q: float) -> float:
    """The smallest age whose cumulative count reaches ``q`` of the total (NumPy's ``inverted_cdf``), from the
    histogram of :func:`learners.age_bin`: exact below ``AGE_EXACT``, else the lower edge of its bin."""
    total = int(hist.sum())
    if total == 0:
        return float("nan")
    k = int(np.searchsorted(np.cumsum(hist), q * total, side="left"))
    if k < L.AGE_EXACT:
        return float(k)
    octave, sub = divmod(k - L.AGE_EXACT, L.AGE_PER_OCTAVE)
    return float(L.AGE_EXACT * 2.0**octave * (1.0 + sub / L.AGE_PER_OCTAVE))


def replay_diagnostics(rep: L.ReplayArrays, on: bool = True) -> dict:
    """ESS fraction and mean of the IS weights, median and 90th percentile age (updates since the replayed
    slot's previous replay, or since the memory was filled), coverage (share of slots replayed at least once)
    and the largest replay count, over every update of a run; all NaN for a run that did not gather them."""
    if not on:
        return dict.fromkeys(DIAGNOSTICS, float("nan"))
    replays = rep.slot_stats[:, 0]
    t = int(replays.sum())
    sw, sw2 = float(rep.wsum[0]), float(rep.wsum[1])
    return {
        "ess_fraction": sw * sw / (t * sw2) if t and sw2 > 0 else float("nan"),
        "weight_mean": sw / t if t else float("nan"),
        "age_median": age_quantile(rep.ages, 0.5),
        "age_p90": age_quantile(rep.ages, 0.9),
        "coverage": float(np.count_nonzero(replays)) / replays.shape[0],
        "max_replays": int(replays.max()) if replays.shape[0] else 0,
    }


def kernel_args(cfg: RunConfig, seed) -> tuple:
    """What :func:`run` hands ``run_kernel`` for one seeded run of ``cfg``, made in the module docstring's
    random-call order: the transition table, Q*, theta, the settings, the replay, the generator and the curve
    (theta, the replay and the curve are filled in place). The speed benchmark times the same call."""
    validate(cfg)
    rng = np.random.default_rng(seed)
    memory = build_memory(cfg.n, rng)
    theta = initial_theta(cfg, rng)
    rep = allocate(cfg, memory)
    curve = np.empty(-(-cfg.cap // cfg.record_every) + 1 if cfg.record_every else 0)
    table = L.transition_table(memory, cfg.n)
    return table, q_star(cfg.n), theta, settings(cfg), rep, rng, curve


def run(cfg: RunConfig, seed) -> RunResult:
    """One seeded run of ``cfg`` (see the module docstring for the random-call order)."""
    args = kernel_args(cfg, seed)
    conv, steps = L.run_kernel(*args)
    _, _, theta, _, rep, _, curve = args
    return RunResult(int(conv), int(steps), curve, theta, replay_diagnostics(rep, cfg.diagnostics))


def run_seeds(cfg: RunConfig, seeds, progress=None) -> list[RunResult]:
    """:func:`run` for every seed; ``progress`` (e.g. a tqdm bar) gets ``update(1)`` per run."""
    out = []
    for seed in seeds:
        out.append(run(cfg, seed))
        if progress is not None:
            progress.update(1)
    return out


def run_lr1(
    n: int,
    scheme: str,
    *,
    rho: float = 0.4,
    window: int | None = None,
    eta: float = 0.0,
    init: str = "td",
    seed,
    cap: int = 100_000_000,
    alpha: float = 1.0,
    eps: float = 1e-6,
    mode: str = "max",
    idealised: bool = False,
) -> int:
    """Updates until convergence of PSER Theorem 1's learner; ``-1`` if not within ``cap``.

    Tabular Q-learning with learning rate 1 from ``Q = 0`` on the pre-filled
    memory, replaying with proportional PER (``scheme="per"``) or PSER
    (``"pser"``); priorities ``(|delta| + eps)^alpha`` (``alpha = 1``: "sampled
    according to their priorities").  ``init="td"`` is the theorem's fill: every
    transition gets the priority of its TD error at ``Q = 0`` (so only the
    rewarded transition has a large one; PSER then decays it backwards, eq. 6/7,
    over ``window`` steps, default eq. 8-9).  ``eta`` is PSER eq. 10 (0: off,
    the theorem's model).

    "Converged" means every ``|Q(s, a) - Q*(s, a)| <= 1e-12`` over all ``2n``
    pairs.  With learning rate 1 from ``Q = 0`` the wrong actions never move
    and ``Q(s_i, right)`` becomes exact exactly when it is replayed after
    ``Q(s_(i+1), right)`` is, so the count equals the end of the ``n``-th
    Q-interval of the theorem's proof.

    ``idealised=False`` runs the algorithms as published: a replayed
    transition's priority comes from the TD error of its update (so the
    rewarded transition keeps priority 1 after its first replay, and PSER
    re-decays it).  ``idealised=True`` uses the TD error after the update
    (0 here), the theorem's "priority drops to 0".
    """
    if scheme not in ("per", "pser"):
        raise ValueError(f"scheme must be 'per' or 'pser', got {scheme!r}")
    cfg = RunConfig(
        n=n, learner="tabular", scheme=scheme, alpha=alpha, eps=eps, init=init, rho=rho, window=window, eta=eta,
        mode=mode, lr=1.0, q0="zeros", criterion="exact", post_priority=idealised, cap=cap,
    )  # fmt: skip
    return run(cfg, seed).updates


__all__ = [
    "DIAGNOSTICS", "INITS", "LEARNERS", "SCHEMES", "RunConfig", "RunResult", "initial_max_priority",
    "replay_diagnostics", "run", "run_lr1", "run_seeds", "settings",
]  # fmt: skip
