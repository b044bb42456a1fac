"""The replay benchmark's contenders: prioritylab's buffer and the peer libraries', each built, filled and
stepped as :mod:`prioritylab.bench.replay` times it, with the probe its self-check drives.

The contenders (peers are optional and skipped when not importable; install them
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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..replay import ReplayBuffer
from ..samplers import make_sampler
from . import importable

BATCH = 256
BETA = 0.4
ALPHA = 0.6
POOL_STEPS = 16
"""Pre-made environment steps per contender, cycled through."""
MARKED_ENVS = 256
"""The most environments :class:`MarkedSteps` marks frames for: a frame names its environment in one uint8 pixel."""
PEERS = ("cpprb", "tianshou", "sb3")


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
"""Slots of each layout's buffer in a quick run (``prioritylab bench replay --quick``)."""


class Edge(NamedTuple):
    """Rows where a contender, by its own documented rules, hands back fields other than those written with them."""

    rows: np.ndarray
    fields: frozenset
    """The fields that may differ there (``obs``, ``next_obs``, ``action``, ``reward``)."""
    what: str


@dataclass
class Probe:
    """A contender's own calls, as its timed step makes them, for the self-check
    (:func:`prioritylab.bench.replay_check.check_contender`).

    Rows are numbered as :class:`MarkedSteps` writes them: after ``written`` steps of ``n``
    environments, row ``t * n + e`` is step ``t`` of environment ``e``.
    """

    add: Callable[[], None]
    """Write the pool's next step (the timed step's add)."""
    draw: Callable[[], object]
    """The timed step's sample call and hand-over: one batch of ``BATCH``."""
    view: Callable[[object], dict]
    """A drawn batch as NumPy arrays in the layout's shapes: ``obs``, ``next_obs``, ``action``, ``reward``,
    ``weights`` and ``indices`` (None where the contender hands none back)."""
    update: Callable[[object, np.ndarray], None] | None
    """The timed step's priority update, given the TD errors of a drawn batch; None for a uniform contender."""
    locate: Callable[[np.ndarray, int], np.ndarray] | None
    """The rows the reported indices hold after ``written`` steps; None where no index is reported (SB3)."""
    sampleable: Callable[[int], np.ndarray]
    """The rows the contender may draw after ``written`` steps, by its own rules."""
    eps: float = 0.0
    """What the contender adds to ``|td|`` before raising it to ``alpha``."""
    normalise: str | None = None
    """IS weights divided by the largest weight of the ``"buffer"`` or of the ``"batch"``; None: no IS weights."""
    edges: Callable[[int], dict[str, Edge]] = lambda written: {}
    """Named differences: rows where the contender's own rules hand back other fields than those written."""


@dataclass
class Contender:
    name: str
    ours: bool
    kind: str  # "per" or "uniform"
    step: Callable[[], object]
    stores: str
    memory_bytes: int | None = None
    rss_bytes: int | None = None
    probe: Probe | None = None


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


class MarkedSteps:
    """Environment steps whose content names the row they are written as, for the self-check
    (:func:`prioritylab.bench.replay_check.check_contender`).

    Row ``t * n + e`` is step ``t`` of environment ``e``, one episode per environment that
    never ends.  Its observation encodes ``(t, e)``: on the MuJoCo layout ``obs = t * n + e
    + k / 32`` in component ``k``; with frame stacks each frame carries its own step and
    environment in its first three pixels (``t mod 256``, ``t // 256``, ``e``) and the stack
    of step ``t`` is the frames of steps ``t - 3 .. t``, the first frame repeated before step 0
    (as gymnasium's frame stack pads).  ``next_obs`` of a step is the next step's ``obs``; the
    action and reward are functions of the row.  Unlike :class:`Steps`, the pool is not
    cycled: each step is handed out once.
    """

    def __init__(self, layout: Layout, n: int, size: int):
        self.layout, self.n, self.size, self.i = layout, n, size, 0
        ids = np.arange((size + 1) * n).reshape(size + 1, n)
        if layout.frame_stack > 1:
            k, frame_shape = layout.frame_stack, layout.obs_shape[1:]
            pixels = int(np.prod(frame_shape))
            if pixels < 3 or size >= 2**16 or n > MARKED_ENVS:
                raise ValueError(f"marked frames need 3 pixels, < 2^16 steps and <= {MARKED_ENVS} environments, got "
                                 f"{pixels} pixels, {size} steps, {n} environments")  # fmt: skip
            t = np.arange(size + 1)[:, None, None]
            e = np.arange(n)[None, :, None]
            p = np.arange(pixels)[None, None, :]
            frames = (7 * t + 13 * e + 3 * p) % 256
            frames[..., 0], frames[..., 1] = (t % 256)[..., 0], (t // 256)[..., 0]
            frames[..., 2] = e[..., 0]
            frames = frames.astype(layout.obs_dtype).reshape(size + 1, n, *frame_shape)
            back = np.maximum(np.arange(size + 1)[:, None] - (k - 1) + np.arange(k), 0)  # steps of each stack
            stacks = np.moveaxis(frames[back], 2, 1)  # (step, env, stack, *frame)
        else:
            width = int(np.prod(layout.obs_shape))
            stacks = (ids[..., None] + np.arange(width) / 32).astype(layout.obs_dtype)
            stacks = stacks.reshape(size + 1, n, *layout.obs_shape)
        self.obs, self.next_obs = np.ascontiguousarray(stacks[:-1]), np.ascontiguousarray(stacks[1:])
        ids = ids[:-1]
        if layout.action_shape:
            width = int(np.prod(layout.action_shape))
            action = ids[..., None] + (np.arange(width) + 1) / 64
            self.action = action.astype(layout.action_dtype).reshape(size, n, *layout.action_shape)
        else:  # a discrete action of six, as the peers' Atari action spaces take
            self.action = (ids % 6).astype(layout.action_dtype)
        self.reward = (ids * 0.25 + 0.125).astype(np.float32)
        self.done = np.zeros((size, n), dtype=bool)
        self.td = np.zeros((size, BATCH))
        self.rows = size * n
        flat = (self.rows,)
        self.written = {"obs": self.obs.reshape(flat + layout.obs_shape), "next_obs": self.next_obs.reshape(flat +
                        layout.obs_shape), "action": self.action.reshape(flat + layout.action_shape),
                        "reward": self.reward.reshape(flat)}  # fmt: skip

    def take(self) -> int:
        if self.i >= self.size:
            raise RuntimeError(f"the marked pool's {self.size} steps are all written")
        self.i += 1
        return self.i - 1

    def row_of(self, obs: np.ndarray) -> np.ndarray:
        """The row each observation names (its newest frame, with frame stacks); -1 where it names none."""
        b = obs.shape[0]
        if self.layout.frame_stack > 1:
            f = obs[:, -1].reshape(b, -1).astype(np.int64)
            t, e = f[:, 0] + 256 * f[:, 1], f[:, 2]
            rows = np.where(e < self.n, t * self.n + e, -1)
        else:
            x = obs.reshape(b, -1)[:, 0].astype(np.float64)
            rows = np.where(x == np.round(x), np.round(x), -1).astype(np.int64)
        return np.where((rows >= 0) & (rows < self.rows), rows, -1)

    def where(self, row: int) -> str:
        return f"step {row // self.n} of env {row % self.n}"


# --------------------------------------------------------------------------------------- helpers


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


def _host(x) -> np.ndarray:
    """A handed-over field (torch tensor on any device, or array) as a NumPy array."""
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _rows(n: int, first: int, last: int) -> np.ndarray:
    """Rows of steps ``first`` to ``last`` (both included) of every one of ``n`` environments."""
    return (np.arange(max(first, 0), last + 1)[:, None] * n + np.arange(n)).ravel()


def _per_env_locate(n: int, seg: int) -> Callable[[np.ndarray, int], np.ndarray]:
    """Rows held by the slots of a buffer that gives environment ``e`` the ring ``[e * seg, (e + 1) * seg)``
    (prioritylab and tianshou): after ``steps`` steps, slot ``e * seg + j`` holds the newest step ``t = j mod seg``."""

    def locate(idx: np.ndarray, steps: int) -> np.ndarray:
        env, j = np.divmod(idx, seg)
        return (j + seg * ((steps - 1 - j) // seg)) * n + env

    return locate


def _prioritylab(kind: str, layout: Layout, n: int, capacity: int, steps: Steps, diagnostics: bool = False,
                 normalise: str | None = None, device: str = "cpu") -> Contender:  # fmt: skip
    import torch  # noqa: F401  (imported before timing, as by every contender)

    options = {} if normalise is None else {"normalise": normalise}
    buf = ReplayBuffer(
        capacity, layout.obs_shape, layout.action_shape, sampler=make_sampler(kind, capacity, seed=0, **options),
        num_envs=n, obs_dtype=layout.obs_dtype, action_dtype=layout.action_dtype, frame_stack=layout.frame_stack,
        diagnostics=diagnostics,
    )  # fmt: skip

    def add(i):
        buf.add(steps.obs[i], steps.action[i], steps.reward[i], steps.next_obs[i], steps.done[i], steps.done[i])

    for _ in range(_fill_steps(capacity, n)):
        add(steps.take())

    def draw():
        return buf.sample(BATCH, beta=BETA, device=device)

    def update(batch, td):
        buf.update(batch, td)

    def step():  # the timed step makes the library's calls itself; the closures above serve the self-check
        i = steps.take()
        buf.add(steps.obs[i], steps.action[i], steps.reward[i], steps.next_obs[i], steps.done[i], steps.done[i])
        batch = buf.sample(BATCH, beta=BETA, device=device)
        if kind == "per":
            buf.update(batch, steps.td[i])
        return batch

    def view(batch) -> dict:
        return {"obs": _host(batch.obs), "next_obs": _host(batch.next_obs), "action": _host(batch.action),
                "reward": _host(batch.reward), "weights": _host(batch.weights), "indices": batch.indices}  # fmt: skip

    seg, k = capacity // n, layout.frame_stack

    def sampleable(written: int) -> np.ndarray:
        # The newest step of each environment waits for its next observation (stored as the next step's obs); once
        # the ring has wrapped, a step whose stack reads an overwritten frame is held back as well.
        first = 0 if written <= seg else written - seg + k - 1
        return _rows(n, first, written - 2)

    # Conventions (prioritylab.samplers.per): p = |td| + eps with eps = 1e-6, mass p^alpha, the sampler applies alpha;
    # a batch is stratified (one draw from each of BATCH equal slices of the total mass); IS weights (N P(i))^-beta
    # over the largest of the buffer (a min tree) or, with normalise="batch", of the batch.
    probe = Probe(
        add=lambda: add(steps.take()), draw=draw, view=view, update=update if kind == "per" else None,
        locate=_per_env_locate(n, seg), sampleable=sampleable, eps=buf.sampler.config().get("eps", 0.0),
        normalise=None if kind != "per" else ("batch" if normalise == "batch" else "buffer"),
    )  # fmt: skip
    stores = "newest frame of each observation once per slot" if layout.frame_stack > 1 else "obs once per slot"
    name = f"prioritylab {kind}" + (" (batch IS)" if normalise == "batch" else "")
    name += " +diagnostics" if diagnostics else ""
    return Contender(name, True, kind, _synced(step, device), stores, memory_bytes=buf.memory_bytes(), probe=probe)


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
    # Conventions (cpprb's PrioritizedReplayBuffer docstrings): it applies alpha itself and adds eps = 1e-4 to the
    # priority it is given, mass (p + eps)^alpha; it is given |td| here.  A batch is stratified (one draw from each
    # of BATCH equal slices of the total mass); IS weights are divided by the weight of the least priority stored
    # (the buffer's largest weight).  Every stored row may be drawn; with next_of="obs" the newest row's next_obs is
    # kept apart until the next add.
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

    def draw():
        s = buf.sample(BATCH, beta=BETA)
        return s["indexes"], {k: tensor(s[k]) for k in fields}

    def update(drawn, td):
        buf.update_priorities(drawn[0], np.abs(td))

    def step():  # the timed step makes the library's calls itself; the closures above serve the self-check
        i = steps.take()
        buf.add(obs=obs[i], act=acts[i], rew=steps.reward[i], next_obs=next_obs[i], done=steps.done[i])
        s = buf.sample(BATCH, beta=BETA)
        out = {k: tensor(s[k]) for k in fields}
        buf.update_priorities(s["indexes"], np.abs(steps.td[i]))
        return out

    def view(drawn) -> dict:
        idx, out = drawn
        o, no = _host(out["obs"]), _host(out["next_obs"])
        if compact:
            o, no = np.moveaxis(o, -1, 1), np.moveaxis(no, -1, 1)
        b = o.shape[0]
        return {"obs": o, "next_obs": no, "action": _host(out["act"]).reshape(b, *layout.action_shape),
                "reward": _host(out["rew"]).reshape(b), "weights": _host(out["weights"]),
                "indices": np.asarray(idx, dtype=np.int64)}  # fmt: skip

    def locate(idx: np.ndarray, written: int) -> np.ndarray:
        # one ring over the rows in the order written: row r sits at r mod capacity
        last = written * n - 1
        return idx + capacity * ((last - idx) // capacity)

    def sampleable(written: int) -> np.ndarray:
        return np.arange(max(written * n - capacity, 0), written * n)

    tensor = _tensor(device)
    probe = Probe(add=lambda: add(steps.take()), draw=draw, view=view, update=update, locate=locate,
                  sampleable=sampleable, eps=1e-4, normalise="buffer")  # fmt: skip
    return Contender("cpprb", False, "per", _synced(step, device), stores, probe=probe)


def _tianshou(layout: Layout, n: int, capacity: int, steps: Steps, device: str = "cpu") -> Contender:
    from tianshou.data import Batch, PrioritizedVectorReplayBuffer

    kw = {}
    stores = "obs and obs_next per row"
    if layout.frame_stack > 1:
        kw = {"stack_num": layout.frame_stack, "save_only_last_obs": True, "ignore_obs_next": True}
        stores = "newest frame of obs once per row (save_only_last_obs, ignore_obs_next)"
    # Conventions (tianshou.data.buffer.prio): update_weight takes |td| itself, adds float32's eps (1.19e-7) and
    # applies alpha, mass (|td| + eps)^alpha; new rows get the largest priority given so far (1 at first).  The
    # rows of a batch are drawn independently.  IS weights are (mass / least priority given)^-beta, the least
    # priority not raised to alpha, then divided by the batch's largest (weight_norm=True, the default), which
    # cancels that least priority: (N P(i))^-beta over the batch's largest (the vector buffer keeps weight_norm=True
    # whatever it is given: it rebuilds itself from its sub-buffers' options, which do not hold it).  Every stored
    # row may be drawn, the newest of each environment included.
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

    def draw():
        b, idx = buf.sample(BATCH)
        return idx, {k: tensor(np.asarray(b[k])) for k in fields}

    def update(drawn, td):
        buf.update_weight(drawn[0], td)

    def step():  # the timed step makes the library's calls itself; the closures above serve the self-check
        i = steps.take()
        buf.add(batches[i], buffer_ids=ids)
        b, idx = buf.sample(BATCH)
        out = {k: tensor(np.asarray(b[k])) for k in fields}
        buf.update_weight(idx, steps.td[i])
        return out

    def view(drawn) -> dict:
        idx, out = drawn
        return {"obs": _host(out["obs"]), "next_obs": _host(out["obs_next"]), "action": _host(out["act"]),
                "reward": _host(out["rew"]), "weights": _host(out["weight"]), "indices": np.asarray(idx)}  # fmt: skip

    seg, k = capacity // n, layout.frame_stack

    def sampleable(written: int) -> np.ndarray:
        return _rows(n, written - seg, written - 1)

    def edges(written: int) -> dict[str, Edge]:
        if k == 1:  # obs_next is stored with each row
            return {}
        # With ignore_obs_next, obs_next is the stack at next(index), and next() treats the newest index of an
        # environment as an episode's end: its obs_next is its own obs.  prev() treats the index after the newest
        # (the oldest, once the ring has wrapped) as an episode's start: the stacks of the oldest k - 1 rows repeat
        # the oldest stored frame where the overwritten earlier frames were.
        out = {"newest row's obs_next": Edge(
            _rows(n, written - 1, written - 1), frozenset({"next_obs"}),
            "samples the newest row of each environment before its next observation is stored and hands back "
            "its own obs as obs_next")}  # fmt: skip
        if written > seg:
            out["oldest rows' stacks"] = Edge(
                _rows(n, written - seg, written - seg + k - 2), frozenset({"obs", "next_obs"}),
                f"once the ring has wrapped, pads the stacks of the oldest {k - 1} rows of each environment with the "
                "oldest stored frame instead of the overwritten frames written with them")  # fmt: skip
        return out

    tensor = _tensor(device)
    probe = Probe(add=lambda: buf.add(batches[steps.take()], buffer_ids=ids), draw=draw, view=view, update=update,
                  locate=_per_env_locate(n, seg), sampleable=sampleable, eps=float(np.finfo(np.float32).eps),
                  normalise="batch", edges=edges)  # fmt: skip
    return Contender("tianshou", False, "per", _synced(step, device), stores, memory_bytes=array_bytes(buf._meta),
                     probe=probe)  # fmt: skip


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

    def view(s) -> dict:
        b = s.observations.shape[0]
        return {"obs": _host(s.observations), "next_obs": _host(s.next_observations),
                "action": _host(s.actions).reshape(b, *layout.action_shape), "reward": _host(s.rewards).reshape(b),
                "weights": None, "indices": None}  # fmt: skip

    seg = capacity // n

    def sampleable(written: int) -> np.ndarray:
        # Conventions (stable_baselines3.common.buffers.ReplayBuffer.sample): uniform over (position, environment);
        # with optimize_memory_usage a row's next_obs is the next position's obs, so once full it never draws the
        # position written next, whose obs the newest row's next_obs has overwritten.
        if written < seg:
            return _rows(n, 0, written - 1)
        return _rows(n, written - seg + (1 if optimize else 0), written - 1)

    probe = Probe(add=lambda: add(steps.take()), draw=lambda: buf.sample(BATCH), view=view, update=None, locate=None,
                  sampleable=sampleable)  # fmt: skip
    stores = "stacked obs once per row (optimize_memory_usage)" if optimize else "obs and next_obs per row"
    return Contender("sb3", False, "uniform", _synced(step, device), stores, memory_bytes=array_bytes(buf, 1),
                     probe=probe)  # fmt: skip


PEER_BUILDERS = {"cpprb": _cpprb, "tianshou": _tianshou, "sb3": _sb3}


def available_peers(wanted: Iterable[str] = PEERS) -> tuple[list[str], dict[str, str]]:
    """The peers that import (with torch), and why the others were skipped."""
    modules = {"cpprb": ("cpprb",), "tianshou": ("tianshou.data",), "sb3": ("stable_baselines3.common.buffers",)}
    return importable(wanted, {name: ("torch", *mods) for name, mods in modules.items()})


def makers(layout: Layout, n: int, peers: Iterable[str], device: str = "cpu") -> list[tuple[str, Callable]]:
    """Every contender of one cell, by name, each built by ``make(capacity, steps)``."""
    dev = {"device": device}
    return [
        ("prioritylab per", lambda cap, s: _prioritylab("per", layout, n, cap, s, **dev)),
        ("prioritylab uniform", lambda cap, s: _prioritylab("uniform", layout, n, cap, s, **dev)),
        # what a training run pays: the replay diagnostics the agents report (the peers compute none)
        ("prioritylab per +diagnostics",
         lambda cap, s: _prioritylab("per", layout, n, cap, s, diagnostics=True, **dev)),
        # the IS normaliser of the deep agents (the papers' code): the minibatch's largest weight, no min tree
        ("prioritylab per (batch IS)", lambda cap, s: _prioritylab("per", layout, n, cap, s, normalise="batch", **dev)),
    ] + [(p, lambda cap, s, p=p: PEER_BUILDERS[p](layout, n, cap, s, **dev)) for p in peers]  # fmt: skip

