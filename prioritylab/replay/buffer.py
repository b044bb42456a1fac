"""The replay buffer of the deep agents: vectorised writer, observations stored once, n-step, device batches.

Three parts with one job each (docs/architecture.md):

* the **storage**: one array per field, one row per slot; every observation
  (its newest frame, when frames are stacked) is stored once;
* the **writer** (:meth:`ReplayBuffer.add`): environment ids, episodes,
  ``terminated`` kept apart from ``truncated``, the ring position of each
  environment, and which slots may be sampled;
* the **sampler** (:mod:`prioritylab.samplers`): priorities over slots only.

Environment ``e`` of ``num_envs`` owns the ring segment ``[e * seg, (e + 1) *
seg)``, ``seg = capacity // num_envs``.  A step writes one *transition* slot
per environment (its observation, action, reward, flags); a step that ends an
episode also writes the final observation into the next slot, a *tail* slot
that is never sampled.  The next observation of slot ``s`` is the
observation in slot ``s + 1``, so ``obs`` and ``next_obs`` share storage.

A transition becomes sampleable once its n-step return and next observation
are written (n later slots of its episode, or its episode's end), and stops
being sampleable when the ring overwrites a frame its stack reads.  The
sampler receives, with each slot, a link to the previous step of the same
episode of the same environment: PSER's backward decay follows these links,
whatever the interleaving of environments.

Memory per slot: ``obs_bytes + action_bytes + 4 (reward) + 3 (flags, kind)
+ 24 (episode step, episode id, env step)`` bytes of storage plus the
sampler's ~90 bytes and the diagnostics' 8 (a draw count; none with
``diagnostics=False``) (:func:`estimate_bytes`).  The sampler's figure holds where the capacity is at or just
below a power of 4 (10^6: 86 bytes); its trees are padded up to the next power of 4, so just past one it is
up to about 150 (2^20 + 1: 149), which the estimate does not count.  For Atari (84x84 uint8
frames, 4-stack, int64 actions): 7,056 + 8 + 31 + 90 + 8 = 7,193 bytes, 7.2 GB
for 10^6 transitions, against 56 GB for stacked ``obs`` and ``next_obs``
stored per transition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._checks import as_index_array, check_indices, check_positive_int, check_range
from ..samplers.base import Sampler
from ..samplers.state import StateError, check_keys, state_array, state_int, state_value
from .diagnostics import ReplayDiagnostics
from .kernels import EMPTY, TAIL, TRANSITION, all_finite, gather_batch, plan_writes, write_step

WEIGHT_FLOOR = np.float32(np.finfo(np.float32).tiny)
"""Smallest IS weight a batch hands out (the smallest normal float32, 1.2e-38): a float64 weight in
(0, 1] that float32 cannot hold would become 0; the smallest normal rather than the smallest subnormal
(1.4e-45) so that it also stays positive where subnormals are flushed to zero."""
SAMPLER_BYTES_PER_SLOT = 90  # stamps, links, flags, TD, raw priority, sum and min trees (4-ary: 4/3 nodes a leaf,
# at a capacity that fills the leaves of a power of 4; up to about 150 just past one: see the module docstring)
DIAGNOSTICS_BYTES_PER_SLOT = np.dtype(np.int64).itemsize  # ReplayDiagnostics' draw count a slot


def least_slots(n_step: int = 1, frame_stack: int = 1) -> int:
    """The fewest slots an environment's segment needs: an n-step return's ``n_step`` slots, a stack's
    ``frame_stack`` frames, and two more (the slot being written and the end of an episode)."""
    return n_step + frame_stack + 2


def estimate_bytes(capacity: int, obs_shape, obs_dtype, action_shape=(), action_dtype=np.float32, frame_stack=1,
                   diagnostics: bool = True) -> int:  # fmt: skip
    """Resident bytes of a buffer of ``capacity`` slots (storage, sampler and, with ``diagnostics``, the
    diagnostics' per-slot counts), from the formula above.  ``obs_shape`` is the stacked observation's, as the
    buffer takes it: with ``frame_stack`` > 1 its first axis is the stack, ``(4, 84, 84)``, and the buffer stores
    one frame a slot.  The sampler's share is a flat :data:`SAMPLER_BYTES_PER_SLOT` (90), at least what each sampler
    takes at a capacity at or just below a power of 4, not just past one (the module docstring)."""
    if frame_stack > 1 and (len(tuple(obs_shape)) < 2 or tuple(obs_shape)[0] != frame_stack):
        raise ValueError(f"obs_shape {tuple(obs_shape)} must be the stacked observation's, its first axis the "
                         f"frame_stack {frame_stack} (as (4, 84, 84) for 4 frames)")  # fmt: skip
    frame_shape = tuple(obs_shape)[1:] if frame_stack > 1 else tuple(obs_shape)
    obs = int(np.prod(frame_shape, dtype=np.int64)) * np.dtype(obs_dtype).itemsize
    act = int(np.prod(action_shape, dtype=np.int64)) * np.dtype(action_dtype).itemsize
    extra = DIAGNOSTICS_BYTES_PER_SLOT if diagnostics else 0
    return capacity * (obs + act + 4 + 3 + 24 + SAMPLER_BYTES_PER_SLOT + extra)


@dataclass
class Batch:
    """A sampled minibatch: NumPy arrays; with a ``device`` asked for, ``obs`` to ``weights`` are torch tensors on
    it, and ``indices``, ``generations``, ``probs`` and ``steps`` (the sampler's bookkeeping) stay NumPy arrays.

    ``reward`` is the n-step return, ``discount`` is ``gamma^m`` after ``m``
    steps (0 if the episode terminated within them): the TD target is
    ``reward + discount * V(next_obs)``.
    """

    obs: Any
    action: Any
    reward: Any
    next_obs: Any
    discount: Any
    weights: Any
    indices: np.ndarray
    generations: np.ndarray
    probs: np.ndarray
    steps: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


def check_rows(name: str, value, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """``value`` as ``dtype`` with ``shape``; rejects what the cast would wrap, truncate or make non-finite."""
    if type(value) is np.ndarray and value.dtype == dtype and value.shape == shape:
        # fast path: nothing to cast; floats only need to be finite (checked in one jitted pass)
        if dtype.kind != "f" or (dtype.itemsize >= 4 and all_finite(value)):
            return value
    arr = np.asarray(value)
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    if arr.dtype == dtype:
        if dtype.kind == "f" and not np.isfinite(arr).all():
            raise ValueError(f"{name} holds a non-finite value: {arr[~np.isfinite(arr)][0]}")
        return arr
    kind = arr.dtype.kind
    if dtype.kind == "b":
        if kind != "b":
            raise ValueError(f"{name} must be booleans, got dtype {arr.dtype}")
        return arr
    if dtype.kind in "iu":
        if kind not in "iub":
            raise ValueError(f"{name} must be integers (stored as {dtype}), got dtype {arr.dtype}")
        info = np.iinfo(dtype)
        if arr.size and (arr.min() < info.min or arr.max() > info.max):
            bad = arr[(arr < info.min) | (arr > info.max)][0]
            raise ValueError(f"{name} holds {bad}, outside the range of {dtype}")
        return arr.astype(dtype)
    if kind not in "fiub":
        raise ValueError(f"{name} must be numbers, got dtype {arr.dtype}")
    with np.errstate(over="ignore", invalid="ignore"):
        out = arr.astype(dtype)
    if not np.isfinite(out).all():
        bad = arr.reshape(-1)[np.flatnonzero(~np.isfinite(out.reshape(-1)))[0]]
        raise ValueError(f"{name} holds {bad}, not finite as {dtype}")
    return out


def _to_device(arr: np.ndarray, device):
    """One transfer per field, from the gathered (pageable) array.

    Measured on an H200 (docs/benchmarks.md, "On a GPU"): a copy through fresh pinned memory and an
    asynchronous transfer took 101.8 us for a MuJoCo batch of 256 and 232.7 us for an Atari batch of 32,
    against 82.5 us and 212.3 us for this plain copy; the pinning costs more than it saves at these sizes.
    """
    import torch

    t = torch.from_numpy(arr)
    return t if device.type == "cpu" else t.to(device)


class ReplayBuffer:
    """Replay for deep agents over ``num_envs`` environments (see the module docstring).

    Parameters
    ----------
    capacity:
        Slots in all (tail slots included); a multiple of ``num_envs``.
    obs_shape, obs_dtype:
        One environment's observation; with ``frame_stack = k > 1`` it is
        ``(k, *frame_shape)`` and only the newest frame is stored.
    action_shape, action_dtype:
        One environment's action (``()`` and an integer dtype for discrete actions).
    sampler:
        Any :class:`prioritylab.samplers.Sampler` of the same capacity.
    n_step, gamma:
        Returns over ``n_step`` steps (1: PER, LAP and PSER use one-step returns).
    diagnostics:
        Accumulate what the sampler replays (:mod:`prioritylab.replay.diagnostics`);
        read with :meth:`diagnostics_report`.
    """

    def __init__(
        self,
        capacity: int,
        obs_shape,
        action_shape=(),
        *,
        sampler: Sampler,
        num_envs: int = 1,
        obs_dtype=np.float32,
        action_dtype=np.float32,
        frame_stack: int = 1,
        n_step: int = 1,
        gamma: float = 0.99,
        diagnostics: bool = True,
    ):
        self.capacity = check_positive_int("capacity", capacity)
        self.num_envs = check_positive_int("num_envs", num_envs)
        self.frame_stack = check_positive_int("frame_stack", frame_stack)
        self.n_step = check_positive_int("n_step", n_step)
        self.gamma = check_range("gamma", gamma, 0.0, 1.0)
        if capacity % num_envs:
            raise ValueError(f"capacity={capacity} must be a multiple of num_envs={num_envs}")
        self.seg = capacity // num_envs
        if self.seg < least_slots(self.n_step, self.frame_stack):
            raise ValueError(
                f"capacity={capacity} gives {self.seg} slots per environment; "
                f"need at least n_step + frame_stack + 2 = {least_slots(self.n_step, self.frame_stack)}"
            )
        if not isinstance(sampler, Sampler):
            raise ValueError(f"sampler must be a prioritylab Sampler, got {type(sampler).__name__}")
        if sampler.capacity != capacity:
            raise ValueError(f"sampler capacity {sampler.capacity} != buffer capacity {capacity}")
        if getattr(sampler, "init", "max") != "max":
            raise ValueError("the buffer adds new items at the max priority: build the sampler with init='max'")
        if sampler.size:
            raise ValueError("the sampler must be empty")
        if getattr(sampler, "name", None) == "per-rank":  # it samples only where every written slot may be drawn
            raise ValueError("sampler per-rank cannot back a ReplayBuffer: the buffer holds slots back from sampling "
                             "(the newest transition, episode tails), and per-rank samples only when none is held")
        self.sampler = sampler
        self.obs_shape = tuple(int(d) for d in obs_shape)
        if frame_stack > 1 and (len(self.obs_shape) < 2 or self.obs_shape[0] != frame_stack):
            raise ValueError(f"obs_shape {self.obs_shape} must start with frame_stack={frame_stack}")
        self.frame_shape = self.obs_shape[1:] if frame_stack > 1 else self.obs_shape
        self.action_shape = tuple(int(d) for d in action_shape)
        self.obs_dtype, self.action_dtype = np.dtype(obs_dtype), np.dtype(action_dtype)
        self._frame_size = int(np.prod(self.frame_shape, dtype=np.int64))
        self._action_size = int(np.prod(self.action_shape, dtype=np.int64))
        n = self.num_envs
        self.storage = {
            "obs": np.zeros((capacity, *self.frame_shape), dtype=self.obs_dtype),
            "action": np.zeros((capacity, *self.action_shape), dtype=self.action_dtype),
            "reward": np.zeros(capacity, dtype=np.float32),
            "terminated": np.zeros(capacity, dtype=bool),
            "truncated": np.zeros(capacity, dtype=bool),
            "kind": np.zeros(capacity, dtype=np.int8),
            "ep_step": np.zeros(capacity, dtype=np.int64),
            "episode": np.full(capacity, -1, dtype=np.int64),
            "env_step": np.full(capacity, -1, dtype=np.int64),
        }
        self.writer = {
            "pos": np.zeros(n, dtype=np.int64),
            "open": np.zeros(n, dtype=bool),
            "last": np.full(n, -1, dtype=np.int64),
            "cur_step": np.zeros(n, dtype=np.int64),
            "episode_of": np.full(n, -1, dtype=np.int64),
            "next_episode": np.zeros(1, dtype=np.int64),
            "steps": np.zeros(1, dtype=np.int64),
        }
        self._plan = {
            "slots": np.empty(2 * n, dtype=np.int64),
            "prev": np.empty(2 * n, dtype=np.int64),
            "kind": np.empty(2 * n, dtype=np.int8),
            "complete": np.empty(n * (self.n_step + 1), dtype=np.int64),
            "invalid": np.empty(2 * n * self.frame_stack, dtype=np.int64),
        }
        self._env_rows = np.arange(n)
        self.diagnostics = ReplayDiagnostics(capacity) if diagnostics else None
        self._flags = np.empty(self._plan["invalid"].shape[0] + self._plan["complete"].shape[0], dtype=bool)
        self._devices: dict[str, object] = {}  # devices ``sample`` has checked, by name

    # -- reads -----------------------------------------------------------------
    def config(self) -> dict:
        return {
            "capacity": self.capacity,
            "num_envs": self.num_envs,
            "obs_shape": list(self.obs_shape),
            "obs_dtype": self.obs_dtype.str,
            "action_shape": list(self.action_shape),
            "action_dtype": self.action_dtype.str,
            "frame_stack": self.frame_stack,
            "n_step": self.n_step,
            "gamma": self.gamma,
        }

    def __len__(self) -> int:
        """Transitions that may be sampled now."""
        return self.sampler.num_sampleable

    @property
    def steps(self) -> int:
        """Vectorised steps added so far (the writer's step counter)."""
        return int(self.writer["steps"][0])

    def memory_bytes(self) -> int:
        """Bytes held by the storage arrays, the sampler's per-slot arrays and the diagnostics' per-slot counts."""
        counts = self.diagnostics.counts.nbytes if self.diagnostics is not None else 0
        return sum(a.nbytes for a in self.storage.values()) + self.sampler.memory_bytes() + counts

    # -- writes ----------------------------------------------------------------
    def add(self, obs, action, reward, next_obs, terminated, truncated) -> None:
        """Add one vectorised step: row ``e`` of each argument is environment ``e``'s transition.

        ``obs`` must be the observation the environment was in (the previous
        call's ``next_obs``, or the reset observation after an episode ended);
        ``next_obs`` is stored only for the rows whose episode ends here.
        Everything is checked before anything changes.
        """
        n = self.num_envs
        obs = check_rows("obs", obs, (n, *self.obs_shape), self.obs_dtype)
        action = check_rows("action", action, (n, *self.action_shape), self.action_dtype)
        reward = check_rows("reward", reward, (n,), np.dtype(np.float32))
        terminated = check_rows("terminated", terminated, (n,), np.dtype(bool))
        truncated = check_rows("truncated", truncated, (n,), np.dtype(bool))
        ends = terminated | truncated
        final = None
        if ends.any():
            final = check_rows("next_obs", next_obs, (n, *self.obs_shape), self.obs_dtype)
        if self.sampler.may_overflow(self.capacity):
            self._whole_or_undone(self._write, obs, action, reward, terminated, truncated, final)
        else:
            self._write(obs, action, reward, terminated, truncated, final)

    def _whole_or_undone(self, write, *args) -> None:
        """Run ``write``; if the sampler refuses a mass past the float range, put the buffer back as it was.

        The sampler checks each of its calls before it changes anything, but one write of the buffer is several
        calls after the rows are stored.  Taken only where :meth:`Sampler.may_overflow` says a refusal is
        possible (priorities near the float range), so the copy costs nothing in a normal run.
        """
        before = self.state_dict()
        try:
            write(*args)
        except ValueError:
            self._restore(before)
            raise

    def _restore(self, before: dict) -> None:
        """Put back a :meth:`state_dict` this buffer has just taken, without the checks of :meth:`load_state_dict`:
        an undo is never refused by a check of a state the buffer wrote itself."""
        self.sampler.load_state_dict(before["sampler"])
        self.storage, self.writer = before["storage"], before["writer"]
        if self.diagnostics is not None:
            self.diagnostics.assign(before["diagnostics"])

    def _write(self, obs, action, reward, terminated, truncated, final) -> None:
        """:meth:`add` of checked rows."""
        n = self.num_envs
        p, st, w = self._plan, self.storage, self.writer
        ns, nc, ni = plan_writes(
            terminated, truncated, self.seg, self.n_step, self.frame_stack, w["pos"], w["open"], w["last"],
            w["cur_step"], w["episode_of"], w["next_episode"], st["kind"], st["ep_step"], st["episode"],
            p["slots"], p["prev"], p["kind"], p["complete"], p["invalid"],
        )  # fmt: skip
        slots = p["slots"][:ns]
        frames = obs[:, -1] if self.frame_stack > 1 else obs
        if ns == n:  # no episode ended: one transition slot per environment, in order, in one jitted call
            cap = self.capacity
            write_step(slots, frames.reshape(n, self._frame_size), action.reshape(n, self._action_size), reward,
                       w["steps"][0], st["obs"].reshape(cap, self._frame_size),
                       st["action"].reshape(cap, self._action_size), st["reward"], st["terminated"],
                       st["truncated"], st["env_step"])  # fmt: skip
        else:
            is_tail = p["kind"][:ns] == TAIL
            env = np.cumsum(~is_tail) - 1  # the environment of each written slot
            trans = slots[~is_tail]
            st["obs"][trans] = frames
            st["action"][trans] = action
            st["reward"][trans] = reward
            st["terminated"][trans] = terminated
            st["truncated"][trans] = truncated
            tails = slots[is_tail]
            st["obs"][tails] = final[env[is_tail], -1] if self.frame_stack > 1 else final[env[is_tail]]
            st["action"][tails] = 0
            st["reward"][tails] = 0.0
            st["terminated"][tails] = False
            st["truncated"][tails] = False
            st["env_step"][slots] = w["steps"][0]
        w["steps"][0] += 1
        self.sampler.add(slots, prev=p["prev"][:ns], sampleable=False)
        if self.diagnostics is not None:
            self.diagnostics.on_write(slots)
        if ni and nc:  # one call: the slots losing a frame, then those now complete (applied in this order)
            flags = self._flags[: ni + nc]
            flags[:ni] = False
            flags[ni:] = True
            self.sampler.set_sampleable(np.concatenate((p["invalid"][:ni], p["complete"][:nc])), flags)
        elif ni:
            self.sampler.set_sampleable(p["invalid"][:ni], False)
        elif nc:
            self.sampler.set_sampleable(p["complete"][:nc], True)

    def end_episodes(self, final_obs, envs) -> None:
        """End the open episodes of ``envs`` as truncated after their last step, ``final_obs[e]`` being the
        observation that step reached (row ``e`` for environment ``e``).

        For an environment restarted outside :meth:`add` (a reset between two training calls): its last
        transition bootstraps from ``final_obs[e]`` instead of continuing into the new episode.  Environments
        without an open episode are left alone.  Everything is checked before anything changes.
        """
        final = check_rows("final_obs", final_obs, (self.num_envs, *self.obs_shape), self.obs_dtype)
        envs = np.unique(as_index_array("envs", np.asarray(envs).reshape(-1)))
        if envs.size and (envs[0] < 0 or envs[-1] >= self.num_envs):
            raise ValueError(f"envs must be in [0, {self.num_envs}), got {envs.tolist()}")
        if self.sampler.may_overflow(self.capacity):
            self._whole_or_undone(self._end, final, envs)
        else:
            self._end(final, envs)

    def _end(self, final: np.ndarray, envs: np.ndarray) -> None:
        """:meth:`end_episodes` of checked arguments."""
        st, w = self.storage, self.writer
        envs = envs[w["open"][envs]]
        seg, k = self.seg, self.frame_stack
        tails, invalid, complete = [], [], []
        for e in envs:
            base, p = e * seg, int(w["pos"][e])
            st["truncated"][w["last"][e]] = True
            t = base + p
            # as in plan_writes: older slots whose stack reads slot t lose a frame
            invalid += [base + (p + j) % seg for j in range(1, k) if st["kind"][base + (p + j) % seg] == TRANSITION
                        and st["ep_step"][base + (p + j) % seg] >= j]  # fmt: skip
            length = int(w["cur_step"][e]) + 1  # the tail's episode step
            st["kind"][t], st["ep_step"][t], st["episode"][t] = TAIL, length, w["episode_of"][e]
            st["obs"][t] = final[e, -1] if k > 1 else final[e]
            st["action"][t], st["reward"][t], st["terminated"][t], st["truncated"][t] = 0, 0.0, False, False
            st["env_step"][t] = w["steps"][0] - 1
            # the episode's last n transitions now have their whole (shortened) returns
            complete += [base + (p - i) % seg for i in range(1, self.n_step + 1) if length - i >= 0]
            w["pos"][e], w["cur_step"][e], w["open"][e] = (p + 1) % seg, length, False
            tails.append(t)
        if not tails:
            return
        slots = np.asarray(tails, dtype=np.int64)
        self.sampler.add(slots, prev=np.full(slots.shape[0], -1, dtype=np.int64), sampleable=False)
        if self.diagnostics is not None:
            self.diagnostics.on_write(slots)
        if invalid:
            self.sampler.set_sampleable(np.asarray(invalid, dtype=np.int64), False)
        self.sampler.set_sampleable(np.asarray(complete, dtype=np.int64), True)

    # -- sampling --------------------------------------------------------------
    def gather(self, indices, strict: bool = True) -> dict[str, np.ndarray]:
        """Observation stacks, actions, n-step returns, discounts and next-observation stacks of ``indices``
        (integer slots in ``[0, capacity)``; ``ValueError`` naming the first that is not).  ``strict``: each slot
        must hold a transition that can be drawn now (``ValueError`` naming the first that does not: a slot never
        written, or one whose n-step return or next observation is not written yet, would be read from slots that
        hold no part of it); ``strict=False`` reads slots drawn earlier, which may since have been overwritten
        (NERS's features of the slots drawn during an episode)."""
        idx = check_indices("indices", indices, self.capacity)
        if strict and idx.size:
            live = self.sampler.sampleable(idx)
            if not live.all():
                raise ValueError(f"indices: slot {int(idx[~live][0])} holds no transition that can be drawn (never "
                                 "written, its n-step return or next observation not written yet, or a frame it "
                                 "reads overwritten)")  # fmt: skip
        return self._gather(idx)

    def _gather(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        """:meth:`gather` of slots the sampler drew (contiguous int64, in range: not checked again)."""
        b, k = idx.shape[0], self.frame_stack
        st = self.storage
        frames, actions = st["obs"], st["action"]
        lead = (b, k) if k > 1 else (b,)
        obs = np.empty((*lead, *self.frame_shape), dtype=frames.dtype)
        next_obs = np.empty((*lead, *self.frame_shape), dtype=frames.dtype)
        action = np.empty((b, *self.action_shape), dtype=actions.dtype)
        ret, disc = np.empty(b, dtype=np.float32), np.empty(b, dtype=np.float32)
        steps = np.empty(b, dtype=np.int64)
        obs_idx = np.empty((b, k), dtype=np.int64)
        next_idx = np.empty((b, k), dtype=np.int64)
        cap, fsize, asize = self.capacity, self._frame_size, self._action_size
        gather_batch(idx, self.seg, k, self.n_step, self.gamma, st["ep_step"], st["reward"], st["terminated"],
                     st["truncated"], frames.reshape(cap, fsize), actions.reshape(cap, asize), obs_idx, next_idx,
                     obs.reshape(b * k, fsize), next_obs.reshape(b * k, fsize), action.reshape(b, asize), ret, disc,
                     steps)  # fmt: skip
        return {"obs": obs, "action": action, "reward": ret, "next_obs": next_obs, "discount": disc, "steps": steps}

    def sample(self, batch_size: int, beta: float | None = None, device=None) -> Batch:
        """Draw ``batch_size`` transitions; tensors on ``device`` (a torch device or name) if given.

        IS weights are float32 in (0, 1]: a weight below float32's range is :data:`WEIGHT_FLOOR`.
        """
        dev = None if device is None else self._device(device)  # refused before anything is drawn
        drawn = self.sampler.sample(batch_size, beta)
        data = self._gather(np.ascontiguousarray(drawn.indices, dtype=np.int64))
        if self.diagnostics is not None:
            self.diagnostics.on_draw(drawn.indices, drawn.weights, self.storage["env_step"],
                                     int(self.writer["steps"][0]) - 1, drawn.beta)  # fmt: skip
        weights = np.maximum(drawn.weights.astype(np.float32), WEIGHT_FLOOR)  # stays in (0, 1] as float32
        if dev is not None:
            if dev.type == "cpu":  # no copy: the tensors share the arrays' memory
                from torch import from_numpy
                data = {k: (v if k == "steps" else from_numpy(v)) for k, v in data.items()}
                weights = from_numpy(weights)
            else:
                data = {k: (v if k == "steps" else _to_device(v, dev)) for k, v in data.items()}
                weights = _to_device(weights, dev)
        return Batch(
            obs=data["obs"], action=data["action"], reward=data["reward"], next_obs=data["next_obs"],
            discount=data["discount"], weights=weights, indices=drawn.indices, generations=drawn.generations,
            probs=drawn.probs, steps=data["steps"],
        )  # fmt: skip

    def _device(self, device):
        """``device`` as a torch device, once checked to be usable here (a tensor made on it); ``ValueError``
        naming it otherwise.  Checked once per name: ``sample`` is on the training loop's path."""
        dev = self._devices.get(str(device))
        if dev is None:
            import torch

            try:
                dev = torch.device(device)
                if dev.type != "cpu":
                    torch.empty(0, device=dev)
            except (RuntimeError, AssertionError, TypeError) as err:
                raise ValueError(f"device {device!r} cannot be used here: {err}") from None
            self._devices[str(device)] = dev
        return dev

    def update(self, batch: Batch, td_errors, **values) -> None:
        """Report the batch's TD errors (a NumPy array or a torch tensor); stale items are skipped.

        ``values`` go to the sampler's ``update`` as they are (a learned sampler's
        extra inputs, such as NERS's ``q_values``).
        """
        if hasattr(td_errors, "detach"):
            td_errors = td_errors.detach().to("cpu").double().numpy()
        self.sampler.update(batch.indices, td_errors, batch.generations, **values)
        if self.diagnostics is not None:
            self.diagnostics.on_values(td_abs=np.abs(td_errors))

    def diagnostics_report(self) -> dict[str, float]:
        """The replay figures since the last report (docs/diagnostics.md); empty if diagnostics are off."""
        if self.diagnostics is None:
            return {}
        cap = np.arange(self.capacity)
        try:
            probs = self.sampler.probabilities()
        except ValueError:  # a sampler whose one-draw probabilities depend on the batch
            probs = np.full(self.capacity, np.nan)
        return self.diagnostics.report(probs, self.sampler.sampleable(cap))

    # -- state -----------------------------------------------------------------
    def state_dict(self, copy: bool = True) -> dict:
        """The whole buffer: storage, writer, sampler and diagnostics.

        ``copy=False`` hands out the storage arrays themselves rather than copies: for a
        checkpoint written at once (an Atari replay's frames are gigabytes), never for a state
        kept while the buffer goes on.
        """
        return {
            "config": self.config(),
            "storage": {k: v.copy() if copy else v for k, v in self.storage.items()},
            "writer": {k: v.copy() for k, v in self.writer.items()},
            "sampler": self.sampler.state_dict(),
            "diagnostics": None if self.diagnostics is None else self.diagnostics.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Load a :meth:`state_dict`; checked in full (``ValueError`` naming the field) before anything changes."""
        try:
            check_keys(state, ("config", "storage", "writer", "sampler", "diagnostics"))
            storage, writer = self._parse_state(state)
            diag = state_value(state, "diagnostics")
            if (diag is None) != (self.diagnostics is None):
                raise StateError("state['diagnostics'] does not match whether this buffer keeps diagnostics")
            if diag is not None:
                diag = ReplayDiagnostics.parse_state(diag, self.capacity)
                self._check_diagnostics(diag, storage, writer)
        except StateError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, OverflowError, AttributeError) as err:
            raise ValueError(f"buffer state cannot be loaded: {type(err).__name__}: {err}") from None
        self.sampler.load_state_dict(state["sampler"])  # atomic itself; the last step that can fail
        self.storage, self.writer = storage, writer
        if diag is not None:
            self.diagnostics.assign(diag)

    def _parse_state(self, state) -> tuple[dict, dict]:
        config = state_value(state, "config")
        if not isinstance(config, dict) or config != self.config():
            raise StateError(f"state['config'] = {config!r} differs from this buffer's settings {self.config()}")
        cap = self.capacity
        raw_storage = state_value(state, "storage")
        check_keys(raw_storage, self.storage, "state['storage']")
        storage = {}
        for key, arr in self.storage.items():
            storage[key] = state_array(raw_storage, key, arr.dtype, arr.shape)
        kind = storage["kind"]
        if not np.isin(kind, (EMPTY, TRANSITION, TAIL)).all():
            raise StateError("state['storage']['kind'] holds an unknown slot kind")
        if (storage["ep_step"] < 0).any():
            raise StateError("state['storage']['ep_step'] must be non-negative")
        raw_writer = state_value(state, "writer")
        check_keys(raw_writer, self.writer, "state['writer']")
        writer = {}
        for key, arr in self.writer.items():
            writer[key] = state_array(raw_writer, key, arr.dtype, arr.shape)
        if ((writer["pos"] < 0) | (writer["pos"] >= self.seg)).any():
            raise StateError(f"state['writer']['pos'] must be in [0, {self.seg})")
        last = writer["last"]
        ok_last = (last == -1) | ((last >= 0) & (last < cap))
        if not ok_last.all() or (writer["open"] & (last < 0)).any():
            raise StateError("state['writer']['last'] must be a slot for every environment in an episode")
        for e in np.flatnonzero(writer["open"]):
            s = last[e]
            if s // self.seg != e or kind[s] != TRANSITION or storage["ep_step"][s] != writer["cur_step"][e]:
                raise StateError(
                    f"state['writer']['last'] = {s} and ['cur_step'] = {writer['cur_step'][e]} of environment {e}, "
                    "in an episode by state['writer']['open'], disagree with that slot's "
                    "state['storage']['kind'] and ['ep_step']"
                )
        sampler_state = state_value(state, "sampler")
        gen = state_array(sampler_state, "generation", np.int64, (cap,))
        writes = state_int(sampler_state, "writes")
        for key in ("steps", "next_episode"):
            v = int(writer[key][0])
            if not 0 <= v <= writes // (self.num_envs if key == "steps" else 1):
                raise StateError(
                    f"state['writer'][{key!r}] = {v} must be in [0, {writes // self.num_envs}] (each step writes "
                    f"a slot per environment, each episode at least one; state['sampler']['writes'] = {writes})"
                    if key == "steps"
                    else f"state['writer'][{key!r}] = {v} must be in [0, state['sampler']['writes'] = {writes}]"
                )
        written = kind != EMPTY
        if not np.array_equal(gen >= 0, written):
            raise StateError("state['sampler']['generation'] and state['storage']['kind'] disagree on which slots "
                             "are written")  # fmt: skip
        live = state_array(sampler_state, "sampleable", bool, (cap,))
        if (live & (kind != TRANSITION)).any():
            raise StateError("state['sampler']['sampleable'] marks a slot that holds no transition by "
                             "state['storage']['kind']")  # fmt: skip
        for key in ("obs", "action", "reward"):
            if storage[key].dtype.kind == "f" and not np.isfinite(storage[key]).all():
                raise StateError(f"state['storage'][{key!r}] holds a non-finite value")
        for key in ("episode", "env_step"):
            if not np.array_equal(storage[key] >= 0, written) or (storage[key] < -1).any():
                raise StateError(f"state['storage'][{key!r}] must be >= 0 on written slots and -1 elsewhere")
        if written.any():
            for key, counter, name in (("episode", "next_episode", "episodes started"), ("env_step", "steps", "steps")):
                top, count = int(storage[key].max()), int(writer[counter][0])
                if top != count - 1:
                    raise StateError(
                        f"state['storage'][{key!r}] reaches {top}, but state['writer'][{counter!r}] counts {count} "
                        f"{name}: the newest must be {count - 1}"
                    )
            order = np.argsort(gen[written], kind="stable")
            if (np.diff(storage["env_step"][written][order]) < 0).any():
                raise StateError("state['storage']['env_step'] must not decrease in write order "
                                 "(state['sampler']['generation'])")  # fmt: skip
        elif writer["steps"][0] or writer["next_episode"][0]:
            raise StateError("state['writer']['steps'] and ['next_episode'] must be 0 while no slot is written")
        self._check_layout(storage, writer, gen)
        self._check_flags_and_links(storage, writer, sampler_state, gen, live)
        return storage, writer

    def _rings(self, arr: np.ndarray, shift: int) -> np.ndarray:
        """``arr`` (one entry per slot) as ``(num_envs, seg)``, each ring read ``shift`` slots ahead."""
        return np.roll(arr.reshape(self.num_envs, self.seg), -shift, axis=1)

    def _check_flags_and_links(self, storage, writer, sampler_state, gen, live) -> None:
        """What the writer implies for flags, sampleable slots and predecessor links (after
        :meth:`_check_layout`, so each ring is written in order).

        * ``terminated``/``truncated`` only on transitions; a transition ends its episode exactly when
          the next slot of its ring is its tail; the newest slot of a ring never ends an episode (the
          tail would be newer);
        * a transition is sampleable exactly when its n-step return and next observation are written
          (the slot ``n`` ahead is of its episode, or its tail is within ``n``) and every frame of its
          stack still holds its episode's earlier step;
        * the predecessor link of a transition past its episode's first step is the slot before it in
          the ring (with that slot's stamp while it is not overwritten); other slots have none.
        """
        kind, episode, ep_step = storage["kind"], storage["episode"], storage["ep_step"]
        is_trans = kind == TRANSITION
        for key in ("terminated", "truncated"):
            if (storage[key] & ~is_trans).any():
                s = int(np.flatnonzero(storage[key] & ~is_trans)[0])
                raise StateError(f"state['storage'][{key!r}] is set on slot {s}, which holds no transition")
        ends = storage["terminated"] | storage["truncated"]
        ring = self._rings(np.arange(self.capacity), 0)
        nxt = self._rings(np.arange(self.capacity), 1)
        pos = writer["pos"]
        oldest = np.arange(self.seg)[None, :] == ((pos - 1) % self.seg)[:, None]  # the pair newest -> oldest
        pairs = is_trans[ring] & ~oldest
        bad = pairs & (ends[ring] != (kind[nxt] == TAIL))
        newest = np.arange(self.num_envs) * self.seg + (pos - 1) % self.seg
        if bad.any() or (is_trans[newest] & ends[newest]).any():
            s = int(ring[bad][0]) if bad.any() else int(newest[is_trans[newest] & ends[newest]][0])
            raise StateError(
                f"state['storage']['terminated'] or ['truncated'] of slot {s} disagree with the slot after it "
                "(an episode's last transition is followed by its tail, any other by its next step)"
            )
        flat = (self.num_envs, self.seg)
        e0, s0 = episode.reshape(flat), ep_step.reshape(flat)
        complete = np.zeros(flat, dtype=bool)
        for m in range(1, self.n_step + 1):
            same = (self._rings(episode, m) == e0) & (self._rings(ep_step, m) == s0 + m)
            complete |= same & ((m == self.n_step) | (self._rings(kind, m) == TAIL))
        intact = np.ones(flat, dtype=bool)
        for j in range(1, self.frame_stack):
            back = (self._rings(episode, -j) == e0) & (self._rings(ep_step, -j) == s0 - j)
            intact &= (s0 < j) | back
        expected = (is_trans.reshape(flat) & complete & intact).reshape(-1)
        if not np.array_equal(live, expected):
            s = int(np.flatnonzero(live != expected)[0])
            raise StateError(
                f"state['sampler']['sampleable'] is {bool(live[s])} for slot {s}, but its n-step return, next "
                f"observation and frame stack in state['storage'] make it {bool(expected[s])}"
            )
        prev = state_array(sampler_state, "prev", np.int64, (self.capacity,))
        prev_gen = state_array(sampler_state, "prev_gen", np.int64, (self.capacity,))
        before = np.roll(np.arange(self.capacity).reshape(flat), 1, axis=1).reshape(-1)
        want = np.where(is_trans & (ep_step > 0), before, -1)
        kept = (want >= 0) & (gen[before] < gen)
        if not np.array_equal(prev, want) or (kept & (prev_gen != gen[before])).any():
            s = int(np.flatnonzero((prev != want) | (kept & (prev_gen != gen[before])))[0])
            raise StateError(
                f"state['sampler']['prev'] or ['prev_gen'] of slot {s} is not the link to the previous step of "
                "its episode that state['storage'] implies"
            )

    def _check_diagnostics(self, diag: dict, storage, writer) -> None:
        """Draw counts only on transitions; ages below the steps taken."""
        counts, ages = diag["counts"], diag["ages"]
        if ((counts > 0) & (storage["kind"] != TRANSITION)).any():
            s = int(np.flatnonzero((counts > 0) & (storage["kind"] != TRANSITION))[0])
            raise StateError(f"state['diagnostics']['counts'] counts draws of slot {s}, which holds no transition")
        if ages.size and ages.max() >= writer["steps"][0]:
            raise StateError(f"state['diagnostics']['ages'] holds {ages.max()}, not below the "
                             f"{writer['steps'][0]} steps taken")  # fmt: skip

    def _check_layout(self, storage, writer, gen) -> None:
        """Each environment's segment is a ring written in order: the newest slot sits just before the
        write position, and every slot but the oldest follows the slot before it in its episode."""
        seg = self.seg
        kind, ep_step, episode = storage["kind"], storage["ep_step"], storage["episode"]
        # Every slot s of a ring against the slot p before it, all rings at once: a written slot other than
        # the write position either follows an empty slot (only as a ring's first slot, at an episode's
        # first step) or continues p's episode, or starts an episode after p's tail; never older than p.
        flat = (self.num_envs, seg)
        k, st, ep, g_s = kind.reshape(flat), ep_step.reshape(flat), episode.reshape(flat), gen.reshape(flat)
        kp, stp, epp, g_p = (self._rings(a, -1) for a in (kind, ep_step, episode, gen))
        loc = np.arange(seg)[None, :]
        checked = (k != EMPTY) & (loc != (writer["pos"] % seg)[:, None])
        after_empty = checked & (kp == EMPTY) & ((loc != 0) | (st != 0))
        follows = (epp == ep) & (stp == st - 1) & (kp == TRANSITION)
        starts = (st == 0) & (k == TRANSITION) & (kp == TAIL)
        broken = checked & (kp != EMPTY) & (~(follows | starts) | (g_p > g_s))
        for e in range(self.num_envs):
            base, pos = e * seg, int(writer["pos"][e])
            g = gen[base : base + seg]
            newest = base + (pos - 1) % seg
            if g.max() < 0:
                if pos != 0 or writer["open"][e] or writer["episode_of"][e] != -1:
                    raise StateError(
                        f"state['writer']['pos'], ['open'] or ['episode_of'] of environment {e} describe writes "
                        "its segment lacks (state['sampler']['generation'])"
                    )
                continue
            if gen[newest] != g.max():
                raise StateError(
                    f"state['writer']['pos'] of environment {e} is not after its newest slot "
                    "by state['sampler']['generation']"
                )
            if writer["episode_of"][e] != episode[newest]:
                raise StateError(
                    f"state['writer']['episode_of'] of environment {e} is not the state['storage']['episode'] "
                    "of its newest slot"
                )
            if writer["open"][e] != (kind[newest] == TRANSITION) or (
                writer["open"][e] and writer["last"][e] != newest
            ):
                raise StateError(
                    f"state['writer']['open'] or ['last'] of environment {e} disagree with the "
                    "state['storage']['kind'] of its newest slot"
                )
            bad = np.flatnonzero(after_empty[e] | broken[e])
            if bad.size:
                loc = int(bad[0])
                s, p = base + loc, base + (loc - 1) % seg
                if after_empty[e, loc]:
                    raise StateError(f"state['storage']['kind'] and ['ep_step'] of slot {s}: it follows an "
                                     "empty slot")  # fmt: skip
                raise StateError(
                    f"state['storage'] slot {s} does not continue slot {p} (by ['kind'], ['episode'] and "
                    "['ep_step'], written after it by state['sampler']['generation'])"
                )

    def __repr__(self) -> str:
        return (
            f"ReplayBuffer(capacity={self.capacity}, num_envs={self.num_envs}, sampler={self.sampler.name}, "
            f"sampleable={len(self)})"
        )
