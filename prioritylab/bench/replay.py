"""Replay-buffer step throughput and memory, prioritylab's buffer against peer libraries.

One *replay step*, as a deep RL learner with ``N`` environments does it:

1. add one transition from each of the ``N`` environments;
2. sample 256 transitions (with IS weights, ``beta = 0.4``, for the prioritized
   buffers), gather their fields and hand them over as torch tensors on the
   device (``--device``: the CPU by default, where the tensors share the
   gathered arrays; on a CUDA device each step ends with a device
   synchronisation, so the copies are timed in full);
3. update the 256 priorities from fresh TD errors (prioritized buffers only).

Layouts:

* ``mujoco``: observations of 17 float32, actions of 6 float32, 10^6 slots;
* ``atari``: 84x84 uint8 frames stacked by 4, one int64 action, 10^5 slots
  (so that every contender fits in memory at once).

Contenders (peers are optional and skipped when not importable; install them
with the ``bench`` extra):

* ``prioritylab per`` / ``prioritylab uniform``: :class:`prioritylab.replay.ReplayBuffer`
  over the ``per`` or ``uniform`` sampler; one vectorised ``add`` per step,
  ``sample(256, beta=0.4, device=device)`` (one transfer per field) and ``update(batch, td)``.  It stores
  each observation (its newest frame) once.  Built with ``diagnostics=False``, as the
  peers compute no replay diagnostics; ``prioritylab per +diagnostics`` is the same
  ``per`` buffer with them on (what a training run of the agents pays).  ``prioritylab
  per`` normalises its IS weights by the largest over the whole buffer, as cpprb does (with
  a min tree); ``prioritylab per (batch IS)`` by the minibatch's largest, as the deep
  agents do by default and tianshou does by default (``weight_norm=True``; it keeps the
  least priority as one number, no min tree): the like-for-like row against tianshou.
* ``cpprb``: ``cpprb.PrioritizedReplayBuffer``, all ``N`` rows in one ``add``
  call; ``sample(256, beta=0.4)``, ``torch.as_tensor(field, device=device)`` of
  each field, ``update_priorities``.  With one environment and Atari frames it stores
  ``obs`` once per row (``next_of="obs"``) with ``stack_compress="obs"`` (which
  takes the stack as the last axis, so its frames are given channels-last); those
  options assume consecutive rows come from one stream, so with ``N > 1`` (rows of
  different environments interleaved) it stores ``obs`` and ``next_obs`` in full.
* ``tianshou``: ``tianshou.data.PrioritizedVectorReplayBuffer`` with ``N``
  sub-buffers (one ``add`` of an ``N``-row batch); ``sample(256)``,
  ``torch.as_tensor(field, device=device)`` of each field, ``update_weight``.  For Atari, its own
  frame options: ``stack_num=4``, ``save_only_last_obs=True``,
  ``ignore_obs_next=True`` (one frame per row; stacks rebuilt when sampling).
* ``sb3``: ``stable_baselines3.common.buffers.ReplayBuffer`` (uniform) with
  ``n_envs=N`` and ``device=device``; its ``sample`` already returns torch
  tensors there; no update.  For
  Atari ``optimize_memory_usage=True`` (stacked ``obs`` once per row; the next
  row is the next observation).

``prioritylab per`` is compared with the fastest prioritized peer, ``prioritylab
uniform`` with ``sb3``.  Every buffer is filled to capacity before timing; the
timed steps end no episode (for anyone).  Inputs are pre-made (a pool of
steps cycled through), so making them is not charged to anyone.

Timing as in :mod:`prioritylab.bench.sumtree`: each measurement loops one
contender's step for ``seconds`` after warm-up steps; the contenders of a cell
are interleaved, their order rotating every repeat, and the median over
``repeats`` is reported.

Memory (Atari layout): resident bytes per transition, measured as the growth
of the process's resident set while each buffer is built and filled (and, for
prioritylab, :meth:`ReplayBuffer.memory_bytes`), next to
:func:`prioritylab.replay.estimate_bytes` and to storing stacked ``obs`` and
``next_obs`` per transition.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

import numpy as np

from ..replay import ReplayBuffer, estimate_bytes
from ..samplers import make_sampler
from .sumtree import measure

BATCH = 256
BETA = 0.4
ALPHA = 0.6
POOL_STEPS = 16
"""Pre-made environment steps per contender, cycled through."""
PEERS = ("cpprb", "tianshou", "sb3")
PRIORITIZED_PEERS = ("cpprb", "tianshou")


@dataclass(frozen=True)
class Layout:
    name: str
    obs_shape: tuple
    obs_dtype: type
    action_shape: tuple
    action_dtype: type
    frame_stack: int
    capacity: int

    @property
    def stacked_obs_bytes(self) -> int:
        return int(np.prod(self.obs_shape)) * np.dtype(self.obs_dtype).itemsize


LAYOUTS = {
    "mujoco": Layout("mujoco", (17,), np.float32, (6,), np.float32, 1, 10**6),
    "atari": Layout("atari", (4, 84, 84), np.uint8, (), np.int64, 4, 10**5),
}
QUICK_CAPACITY = {"mujoco": 2**12, "atari": 2**10}


@dataclass
class Result:
    """One contender's median steps/s in one (layout, N) cell, its ratio, and its memory."""

    layout: str
    num_envs: int
    capacity: int
    contender: str
    ours: bool
    steps_per_s: float
    rates: list[float]
    ratio: float | None = None
    """Ours: over the fastest comparable peer (prioritized for ``per``, ``sb3`` for ``uniform``)."""
    versus: str | None = None
    rss_bytes: int | None = None
    """Growth of the resident set while this buffer was built and filled."""
    memory_bytes: int | None = None
    """Bytes of the buffer's arrays: prioritylab's ``memory_bytes()``; the ``nbytes`` of tianshou's and
    stable-baselines3's arrays (cpprb's storage is not visible from Python)."""
    stores: str = ""
    extra: dict = field(default_factory=dict)


@dataclass
class Contender:
    name: str
    ours: bool
    kind: str  # "per" or "uniform"
    step: Callable[[], object]
    stores: str
    memory_bytes: int | None = None
    rss_bytes: int | None = None


class Steps:
    """A pool of pre-made vectorised environment steps, handed out in turn."""

    def __init__(self, layout: Layout, n: int, rng: np.random.Generator, size: int = POOL_STEPS):
        def draw(shape, dtype):
            if np.dtype(dtype).kind == "u":
                return rng.integers(0, 256, (size, n, *shape), dtype=dtype)
            if np.dtype(dtype).kind == "i":
                return rng.integers(0, 6, (size, n, *shape)).astype(dtype)
            return rng.standard_normal((size, n, *shape)).astype(dtype)

        self.obs = draw(layout.obs_shape, layout.obs_dtype)
        self.next_obs = np.roll(self.obs, -1, axis=0)
        self.action = draw(layout.action_shape, layout.action_dtype)
        self.reward = rng.standard_normal((size, n)).astype(np.float32)
        self.done = np.zeros((size, n), dtype=bool)
        self.td = rng.standard_normal((size, BATCH))
        self.size = size
        self.i = 0

    def take(self) -> int:
        i = self.i
        self.i = (i + 1) % self.size
        return i


# --------------------------------------------------------------------------------------- helpers


def rss_bytes() -> int | None:
    """Resident set size of this process (Linux ``/proc``; None elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            import os

            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def array_bytes(obj, depth: int = 3) -> int:
    """Bytes of the NumPy arrays an object holds in its attributes (nested ``depth`` deep)."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if depth == 0:
        return 0
    values = obj.values() if isinstance(obj, dict) else getattr(obj, "__dict__", {}).values()
    return sum(array_bytes(v, depth - 1) for v in values)


def _fill_steps(capacity: int, n: int) -> int:
    return capacity // n


# ------------------------------------------------------------------------------------- contenders


def _prioritylab(kind: str, layout: Layout, n: int, capacity: int, steps: Steps, diagnostics: bool = False,
                 normalise: str | None = None, device: str = "cpu") -> Contender:  # fmt: skip
    import torch  # noqa: F401  (imported before timing, as by every contender)

    options = {} if normalise is None else {"normalise": normalise}
    buf = ReplayBuffer(
        capacity, layout.obs_shape, layout.action_shape, sampler=make_sampler(kind, capacity, seed=0, **options),
        num_envs=n, obs_dtype=layout.obs_dtype, action_dtype=layout.action_dtype, frame_stack=layout.frame_stack,
        diagnostics=diagnostics,
    )  # fmt: skip
    for _ in range(_fill_steps(capacity, n)):
        i = steps.take()
        buf.add(steps.obs[i], steps.action[i], steps.reward[i], steps.next_obs[i], steps.done[i], steps.done[i])

    def step():
        i = steps.take()
        buf.add(steps.obs[i], steps.action[i], steps.reward[i], steps.next_obs[i], steps.done[i], steps.done[i])
        batch = buf.sample(BATCH, beta=BETA, device=device)
        if kind == "per":
            buf.update(batch, steps.td[i])
        return batch

    stores = "newest frame of each observation once per slot" if layout.frame_stack > 1 else "obs once per slot"
    name = f"prioritylab {kind}" + (" (batch IS)" if normalise == "batch" else "")
    name += " +diagnostics" if diagnostics else ""
    return Contender(name, True, kind, _synced(step, device), stores, memory_bytes=buf.memory_bytes())


def _synced(step: Callable[[], object], device: str) -> Callable[[], object]:
    """``step``, waiting for the device at its end when the device is CUDA (copies are asynchronous there)."""
    if not device.startswith("cuda"):
        return step
    import torch

    def synced():
        out = step()
        torch.cuda.synchronize()
        return out

    return synced


def _tensor(device: str) -> Callable[[np.ndarray], object]:
    """A peer's way to a torch tensor on ``device``: shared memory on the CPU, else a copy there."""
    import torch

    if device == "cpu":
        return torch.from_numpy
    return lambda arr: torch.as_tensor(arr, device=device)


def _cpprb(layout: Layout, n: int, capacity: int, steps: Steps, device: str = "cpu") -> Contender:
    from cpprb import PrioritizedReplayBuffer

    act_shape = layout.action_shape or 1
    compact = layout.frame_stack > 1 and n == 1
    obs, next_obs, obs_shape = steps.obs, steps.next_obs, layout.obs_shape
    if compact:  # cpprb compresses stacks along the last axis: frames go channels-last
        obs = np.ascontiguousarray(np.moveaxis(obs, 2, -1))
        next_obs = np.ascontiguousarray(np.moveaxis(next_obs, 2, -1))
        obs_shape = obs.shape[2:]
    env_dict = {
        "obs": {"shape": obs_shape, "dtype": layout.obs_dtype},
        "act": {"shape": act_shape, "dtype": layout.action_dtype},
        "rew": {},
        "done": {},
    }
    if compact:
        # one stream: the next row's obs is this row's next_obs; consecutive stacks share frames
        buf = PrioritizedReplayBuffer(capacity, env_dict, alpha=ALPHA, next_of="obs", stack_compress="obs")
        stores = "obs once per row (next_of), stack-compressed, frames channels-last"
    else:
        env_dict["next_obs"] = env_dict["obs"]
        buf = PrioritizedReplayBuffer(capacity, env_dict, alpha=ALPHA)
        stores = "obs and next_obs per row" + (" (stacked)" if layout.frame_stack > 1 else "")
    acts = steps.action.reshape(steps.size, n, -1)

    def add(i):
        buf.add(obs=obs[i], act=acts[i], rew=steps.reward[i], next_obs=next_obs[i], done=steps.done[i])

    for _ in range(_fill_steps(capacity, n)):
        add(steps.take())

    fields = ("obs", "act", "rew", "next_obs", "done", "weights")

    def step():
        i = steps.take()
        add(i)
        s = buf.sample(BATCH, beta=BETA)
        out = {k: tensor(s[k]) for k in fields}
        buf.update_priorities(s["indexes"], np.abs(steps.td[i]))
        return out

    tensor = _tensor(device)
    return Contender("cpprb", False, "per", _synced(step, device), stores)


def _tianshou(layout: Layout, n: int, capacity: int, steps: Steps, device: str = "cpu") -> Contender:
    from tianshou.data import Batch, PrioritizedVectorReplayBuffer

    kw = {}
    stores = "obs and obs_next per row"
    if layout.frame_stack > 1:
        kw = {"stack_num": layout.frame_stack, "save_only_last_obs": True, "ignore_obs_next": True}
        stores = "newest frame of obs once per row (save_only_last_obs, ignore_obs_next)"
    buf = PrioritizedVectorReplayBuffer(capacity, n, alpha=ALPHA, beta=BETA, **kw)
    batches = [
        Batch(obs=steps.obs[i], act=steps.action[i], rew=steps.reward[i], terminated=steps.done[i],
              truncated=steps.done[i], obs_next=steps.next_obs[i], info=Batch())
        for i in range(steps.size)
    ]  # fmt: skip
    ids = np.arange(n)
    for _ in range(_fill_steps(capacity, n)):
        buf.add(batches[steps.take()], buffer_ids=ids)
    fields = ("obs", "act", "rew", "obs_next", "terminated", "weight")

    def step():
        i = steps.take()
        buf.add(batches[i], buffer_ids=ids)
        b, idx = buf.sample(BATCH)
        out = {k: tensor(np.asarray(b[k])) for k in fields}
        buf.update_weight(idx, steps.td[i])
        return out

    tensor = _tensor(device)
    return Contender("tianshou", False, "per", _synced(step, device), stores, memory_bytes=array_bytes(buf._meta))


def _sb3(layout: Layout, n: int, capacity: int, steps: Steps, device: str = "cpu") -> Contender:
    from gymnasium import spaces
    from stable_baselines3.common.buffers import ReplayBuffer as SB3ReplayBuffer

    if np.dtype(layout.obs_dtype).kind == "u":
        obs_space = spaces.Box(0, 255, layout.obs_shape, dtype=layout.obs_dtype)
    else:
        obs_space = spaces.Box(-np.inf, np.inf, layout.obs_shape, dtype=layout.obs_dtype)
    if layout.action_shape:
        act_space = spaces.Box(-1.0, 1.0, layout.action_shape, dtype=layout.action_dtype)
    else:
        act_space = spaces.Discrete(6)
    optimize = layout.frame_stack > 1
    buf = SB3ReplayBuffer(
        capacity, obs_space, act_space, device=device, n_envs=n, optimize_memory_usage=optimize,
        handle_timeout_termination=False,
    )  # fmt: skip
    infos = [{} for _ in range(n)]
    acts = steps.action.reshape(steps.size, n, -1) if not layout.action_shape else steps.action

    def add(i):
        buf.add(steps.obs[i], steps.next_obs[i], acts[i], steps.reward[i], steps.done[i], infos)

    for _ in range(_fill_steps(capacity, n)):
        add(steps.take())

    def step():
        add(steps.take())
        return buf.sample(BATCH)

    stores = "stacked obs once per row (optimize_memory_usage)" if optimize else "obs and next_obs per row"
    return Contender("sb3", False, "uniform", _synced(step, device), stores, memory_bytes=array_bytes(buf, 1))


PEER_BUILDERS = {"cpprb": _cpprb, "tianshou": _tianshou, "sb3": _sb3}


def available_peers(wanted: Iterable[str] = PEERS) -> tuple[list[str], dict[str, str]]:
    """The peers that import (with torch), and why the others were skipped."""
    ok, skipped = [], {}
    for name in wanted:
        try:
            import torch  # noqa: F401

            if name == "cpprb":
                import cpprb  # noqa: F401
            elif name == "tianshou":
                import tianshou.data  # noqa: F401
            elif name == "sb3":
                import stable_baselines3.common.buffers  # noqa: F401
            else:
                raise ValueError(f"unknown peer {name!r}")
        except ImportError as err:
            skipped[name] = f"not importable ({err})"
            continue
        ok.append(name)
    return ok, skipped


# ------------------------------------------------------------------------------------------- runs


def build(layout: Layout, n: int, capacity: int, peers: Iterable[str], seed: int = 0, bar=None,
          device: str = "cpu") -> list[Contender]:  # fmt: skip
    """Build and fill every contender of one cell, recording each one's resident-set growth."""
    out = []
    dev = {"device": device}
    makers = [
        ("prioritylab per", lambda cap, s: _prioritylab("per", layout, n, cap, s, **dev)),
        ("prioritylab uniform", lambda cap, s: _prioritylab("uniform", layout, n, cap, s, **dev)),
        # what a training run pays: the replay diagnostics the agents report (the peers compute none)
        ("prioritylab per +diagnostics",
         lambda cap, s: _prioritylab("per", layout, n, cap, s, diagnostics=True, **dev)),
        # the IS normaliser of the deep agents (the papers' code): the minibatch's largest weight, no min tree
        ("prioritylab per (batch IS)", lambda cap, s: _prioritylab("per", layout, n, cap, s, normalise="batch", **dev)),
    ] + [(p, lambda cap, s, p=p: PEER_BUILDERS[p](layout, n, cap, s, **dev)) for p in peers]  # fmt: skip
    for k, (name, make) in enumerate(makers):
        if bar is not None:
            bar.set_postfix_str(f"{layout.name}, N={n}: filling {name}")
        steps = Steps(layout, n, np.random.default_rng(seed + k))
        make(64 * n, steps).step()  # imports and JIT compilation, so the resident-set growth is the buffer's
        gc.collect()
        before = rss_bytes()
        c = make(capacity, steps)
        after = rss_bytes()
        c.rss_bytes = None if before is None or after is None else after - before
        out.append(c)
    return out


def run(
    layouts: Iterable[str] = tuple(LAYOUTS),
    num_envs: Iterable[int] = (1, 8),
    seconds: float = 1.0,
    repeats: int = 3,
    peers: Iterable[str] = PEERS,
    capacities: dict[str, int] | None = None,
    seed: int = 0,
    progress: bool = True,
    device: str = "cpu",
) -> list[Result]:
    """Measure every contender on every (layout, N) cell; see the module docstring."""
    from tqdm.auto import tqdm

    peers = list(peers)
    results = []
    with tqdm(total=0, disable=not progress, desc="replay bench", unit="run") as bar:
        for name in layouts:
            layout = LAYOUTS[name]
            capacity = (capacities or {}).get(name, layout.capacity)
            for n in num_envs:
                cap = capacity - capacity % n
                contenders = build(layout, n, cap, peers, seed, bar, device)
                bar.total += repeats * len(contenders)
                bar.refresh()
                rates: dict[str, list[float]] = {}
                for r in range(repeats):
                    bar.set_postfix_str(f"{name}, N={n}, repeat {r + 1}/{repeats}")
                    shift = r % len(contenders)
                    for c in contenders[shift:] + contenders[:shift]:
                        rates.setdefault(c.name, []).append(measure(c.step, seconds))
                        bar.update(1)
                results += _cell_results(layout, n, cap, contenders, rates)
                del contenders
                gc.collect()
    return results


def _cell_results(layout: Layout, n: int, capacity: int, contenders: list[Contender], rates) -> list[Result]:
    cell = [
        Result(layout.name, n, capacity, c.name, c.ours, float(np.median(rates[c.name])), rates[c.name],
               rss_bytes=c.rss_bytes, memory_bytes=c.memory_bytes, stores=c.stores)
        for c in contenders
    ]  # fmt: skip
    kinds = {c.name: c.kind for c in contenders}
    for res in cell:
        if not res.ours:
            continue
        rivals = [p for p in cell if not p.ours and kinds[p.contender] == kinds[res.contender]]
        if rivals:
            best = max(rivals, key=lambda p: p.steps_per_s)
            res.ratio, res.versus = res.steps_per_s / best.steps_per_s, best.contender
    return cell


# ---------------------------------------------------------------------------------------- output


def memory_rows(results: list[Result], per: int = 100_000) -> list[dict]:
    """Bytes per ``per`` transitions of each contender (Atari layout when present, else all)."""
    rows = []
    frames = [r for r in results if LAYOUTS[r.layout].frame_stack > 1]
    for r in frames or results:
        layout = LAYOUTS[r.layout]
        stacked = 2 * layout.stacked_obs_bytes * per
        formula = None
        if r.ours:
            formula = estimate_bytes(
                per, layout.obs_shape, layout.obs_dtype, layout.action_shape, layout.action_dtype, layout.frame_stack,
                diagnostics=r.contender.endswith(" +diagnostics"),
            )
        rows.append({
            "layout": r.layout, "num_envs": r.num_envs, "contender": r.contender, "stores": r.stores,
            "rss": None if r.rss_bytes is None else r.rss_bytes * per / r.capacity,
            "reported": None if r.memory_bytes is None else r.memory_bytes * per / r.capacity,
            "formula": formula, "stacked_obs_and_next_obs": stacked,
        })  # fmt: skip
    return rows


def format_table(results: list[Result]) -> str:
    head = f"{'layout':<7} {'N':>2} {'contender':<28} {'steps/s':>10} {'vs best peer':>22}"
    lines = [head, "-" * len(head)]
    prev = None
    for r in results:
        if prev is not None and (r.layout, r.num_envs) != prev:
            lines.append("")
        prev = (r.layout, r.num_envs)
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}x ({r.versus})"
        lines.append(f"{r.layout:<7} {r.num_envs:>2} {r.contender:<28} {r.steps_per_s:>10,.0f} {ratio:>22}")
    return "\n".join(lines)


def format_memory(results: list[Result], per: int = 100_000) -> str:
    def mb(x):
        return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x / 1e6:,.0f}"

    head = (
        f"{'layout':<7} {'N':>2} {'contender':<28} {'RSS MB':>8} {'reported':>9} {'formula':>8} "
        f"{'stacked':>8} {'/stacked':>9}  stores"
    )
    def grown(x):  # a resident set that did not grow measured nothing: the build reused memory freed before it
        if x is not None and not math.isnan(x) and x < 0.5e6:
            return "—" if x <= 0 else "<1"
        return mb(x)

    lines = [f"memory per {per:,} transitions (MB; RSS: the resident set's growth while the buffer was built, "
             "— where it reused freed memory and did not grow)", head, "-" * len(head)]  # fmt: skip
    for row in memory_rows(results, per):
        measured = row["reported"] if row["reported"] is not None else row["rss"]
        frac = "" if not measured or measured < 0.5e6 else f"1/{row['stacked_obs_and_next_obs'] / measured:.1f}"
        lines.append(
            f"{row['layout']:<7} {row['num_envs']:>2} {row['contender']:<28} {grown(row['rss']):>8} "
            f"{mb(row['reported']):>9} {mb(row['formula']):>8} {mb(row['stacked_obs_and_next_obs']):>8} "
            f"{frac:>9}  {row['stores']}"
        )
    return "\n".join(lines)


def to_json(results: list[Result], config: dict, skipped: dict[str, str], machine_load: dict) -> dict:
    from ..results import machine_info, package_versions
    from . import code

    versions = package_versions(("cpprb", "tianshou", "stable-baselines3", "torch"))
    return {
        "config": config,
        "skipped_peers": skipped,
        "machine": machine_info(),
        "load": machine_load,
        "packages": versions,
        **code(),
        "results": [asdict(r) for r in results],
        "memory_per_100k": memory_rows(results),
    }
