"""NERS: a learned replay sampler (Oh et al., 2021, "Learning to sample with local and global contexts").

A permutation-equivariant network scores each transition of a sampled set
from its features D(I) (Section 2.2, eq. 2): state, action, reward, next
state, timestep, |TD error| and the critic's Q-value.  A local network f_l
(per item) and a global network f_g (mean-pooled over the set) are
concatenated and fed to the score network f_s (eq. 3-4).  The scores are the
raw priorities of the sampled items, drawn from the core sum tree with
probability ``score ** alpha / sum`` (eq. 1) and PER's IS weights (eq. 5, beta
annealed to 1 by the caller); new items enter with priority 1.0, the largest
score (Algorithm 1).  At the end of each training episode (Algorithm 1; with
``schedule="evaluation"``, at each evaluation instead) the network is trained by
REINFORCE (eq. 7) on a uniform subset of the slots drawn since the previous
step, with the replay reward r^re of eq. 6.  docs/ners.md has the settings and their
sources, and the two readings of the "previous policy" in eq. 6.

The sampler knows slots only; the transition fields come from a *feature
source* (:class:`BufferFeatures` over a :class:`prioritylab.replay.ReplayBuffer`,
or any object with ``fields`` and ``__call__``), given with
:meth:`NERSSampler.set_feature_source`.  TD errors are the sampler's own
record (:meth:`Sampler.td_errors`); Q-values are passed to :meth:`NERSSampler.update`
by the learner (the agent's ``q_values`` stat).
"""

from __future__ import annotations

import math
from typing import NamedTuple, Protocol

import numpy as np
import torch
from torch import nn

from ..samplers.per import PERSampler
from ..samplers.state import StateError, check_keys, state_int, state_value
from .method_table import MethodEntry, register

BASELINES = ("previous", "first")
"""``previous``: r^re = return now - return at the previous evaluation (eq. 6, the paper's reading, default);
``first``: return now - return at the first evaluation (the authors' public code)."""
SCHEDULES = ("episode", "evaluation")
"""When NERS takes its REINFORCE step: at the end of every training episode, with r^re from that episode's
return against the previous episode's (the default: Algorithm 1's placement, its end-of-episode block, with the
replay reward of the paper's variant NERS*, "the difference of cumulative rewards in not evaluations but training
episodes", Sec. 3.3, which it finds no different from NERS in Fig. 4 b-c), or at each evaluation, with r^re from the
evaluation returns (eq. 6 and the text of Section 2.2, "We update NERS at each evaluation step")."""

# NERS App. B, Table B.1
LOCAL_HIDDEN = (256, 512, 256, 128)
"""Widths of f_l and f_g; the last is the output size d_l = d_g."""
SCORE_HIDDEN = (256, 128, 64)
"""Hidden widths of f_s (then one output unit)."""
SAMPLE_SIZE = 128
"""|I_train|, the sample size to update NERS (n)."""
LEARNING_RATE = 1e-4
"""Adam learning rate of NERS."""
ALPHA, BETA0 = 0.5, 0.4
"""Initial (alpha, beta) of the prioritised buffer; beta annealed to 1 (Table B.1 and its footnote's words, "beta
increases to 1.0"; its formula, beta = 0.4 eta + 1.0 (1 - eta) with eta = step / maximum steps, would run from
1.0 down to 0.4 instead), except under ``dqn``, which keeps every weighted sampler's beta fixed (PSER Table 4 /
Dopamine; docs/ners.md)."""
UNSEEN = 1.0
"""TD-error and Q-value feature of an item with none reported yet (App. B: 1.0 for the newest samples)."""
TIMESTEP_SCALE = 1000.0
"""The timestep feature is the episode step divided by this (a choice of ours: the paper gives no scaling)."""
# NERS App. B, Table B.1 (Atari): the states pass through a CNN, then fully connected layers
CNN_CHANNELS = (32, 64)
"""Output channels of the two convolutions."""
CNN_KERNEL, CNN_STRIDE = 5, 5
"""Filter size and stride of both convolutions (5x5, stride 5)."""
CNN_HIDDEN = (256, 64, 32)
"""Widths of the fully connected layers after flattening; the last is the size of a state's code."""
SMALL_CHANNELS, SMALL_KERNEL, SMALL_STRIDE = (16,), 3, 1
"""Frames smaller than 25x25 (MinAtar's 10x10), which App. B's two 5x5 stride-5 convolutions cannot take:
one 3x3 stride-1 convolution of 16 channels, the MinAtar DQN's (a departure of ours; the paper has no such
frames)."""


class FeatureSource(Protocol):
    """Where the transition fields of a slot come from."""

    fields: tuple[tuple[str, int], ...]
    """``(name, width)`` of every vector field, in the order they are concatenated."""
    images: tuple[tuple[str, tuple[int, int, int]], ...]
    """``(name, (channels, height, width))`` of every image field (uint8 frames); may be empty or absent."""

    def __call__(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """Each vector field of ``indices`` as an array ``(len(indices), width)``, each image field as an
        array ``(len(indices), channels, height, width)``."""


class BufferFeatures:
    """The stored fields of a replay buffer: obs, action, n-step reward, next obs, episode timestep.

    Vector observations are vector fields.  Image observations, a uint8 stack
    of shape ``(channels, height, width)`` as the Atari agents store them, are
    image fields that the network passes through its CNN (App. B); boolean
    images (MinAtar's object channels) are handed over as uint8 0/255.  A
    discrete action is one number.
    """

    def __init__(self, buffer, timestep_scale: float = TIMESTEP_SCALE):
        shape = tuple(buffer.obs_shape)
        image = len(shape) == 3 and np.dtype(buffer.obs_dtype) in (np.uint8, np.bool_)
        if not (len(shape) == 1 and buffer.frame_stack == 1) and not image:
            raise ValueError(
                f"NERS takes vector observations or uint8/bool images (channels, height, width); got observation "
                f"shape {shape} of {np.dtype(buffer.obs_dtype)} (frame_stack={buffer.frame_stack})"
            )
        if not (timestep_scale > 0 and math.isfinite(timestep_scale)):
            raise ValueError(f"timestep_scale must be a positive number, got {timestep_scale!r}")
        self.buffer = buffer
        self.timestep_scale = float(timestep_scale)
        act = int(np.prod(buffer.action_shape, dtype=np.int64)) if buffer.action_shape else 1
        if image:
            self.fields = (("action", act), ("reward", 1), ("timestep", 1))
            self.images = (("obs", shape), ("next_obs", shape))
        else:
            obs = shape[0]
            self.fields = (("obs", obs), ("action", act), ("reward", 1), ("next_obs", obs), ("timestep", 1))
            self.images = ()

    def __call__(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        n = indices.shape[0]
        data = self.buffer.gather(indices, strict=False)  # slots drawn since the last update may be overwritten
        steps = self.buffer.storage["ep_step"][indices]
        out = {
            "action": data["action"].reshape(n, -1),
            "reward": data["reward"].reshape(n, 1),
            "timestep": (steps / self.timestep_scale).reshape(n, 1),
        }
        for name in ("obs", "next_obs"):
            if not self.images:
                out[name] = data[name].reshape(n, -1)
            elif data[name].dtype == np.bool_:
                out[name] = data[name].astype(np.uint8) * np.uint8(255)
            else:
                out[name] = data[name]
        return out


class SetFeatures(NamedTuple):
    """D(I) of a set: the vector features ``(n, width)`` and, for image states, the uint8 frames
    ``(n, images, channels, height, width)`` that the network encodes with its CNN (else ``None``)."""

    vector: np.ndarray
    images: np.ndarray | None = None


def _mlp(sizes: tuple[int, ...]) -> nn.Sequential:
    """Linear layers of the given widths with ReLU between them (the output layer is linear)."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class FrameEncoder(nn.Module):
    """A state's code from its uint8 frames (NERS App. B): two 5x5 convolutions of stride 5 with 32 and 64
    channels, flattened, then fully connected layers of 256, 64 and 32 units (ReLU between all layers).
    Frames under 25x25 take the small-frame convolution (``SMALL_CHANNELS``) instead."""

    def __init__(self, image_shape: tuple[int, int, int], channels=CNN_CHANNELS, hidden=CNN_HIDDEN):
        super().__init__()
        c, h, w = image_shape
        kernel, stride = CNN_KERNEL, CNN_STRIDE
        if min(h, w) < CNN_KERNEL * CNN_STRIDE:  # App. B's CNN needs 25x25: the small-frame CNN (SMALL_*)
            channels, kernel, stride = SMALL_CHANNELS, SMALL_KERNEL, SMALL_STRIDE
        convs: list[nn.Module] = []
        for out in channels:
            convs += [nn.Conv2d(c, out, kernel, stride), nn.ReLU()]
            c, h, w = out, (h - kernel) // stride + 1, (w - kernel) // stride + 1
            if h <= 0 or w <= 0:
                raise ValueError(f"NERS's CNN needs frames of at least {kernel}x{kernel} pixels, got {image_shape[1:]}")
        self.conv = nn.Sequential(*convs, nn.Flatten())
        self.fc = _mlp((c * h * w, *hidden))
        self.out_dim = hidden[-1]

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """Codes ``(n, out_dim)`` of uint8 frames ``(n, channels, height, width)`` (scaled to [0, 1])."""
        return self.fc(torch.relu(self.conv(frames.float() * (1.0 / 255.0))))


class NERSNet(nn.Module):
    """f_l, f_g and f_s (eq. 3-4): logits of the scores of a set, equivariant to its order.

    With ``image_shape`` and ``n_images``, each item's frames pass through one shared
    :class:`FrameEncoder` and the codes are concatenated with its vector features (App. B).
    """

    def __init__(self, in_dim: int, local_hidden=LOCAL_HIDDEN, score_hidden=SCORE_HIDDEN, image_shape=None,
                 n_images: int = 0):  # fmt: skip
        super().__init__()
        self.encoder = FrameEncoder(tuple(image_shape)) if n_images else None
        width = in_dim + (n_images * self.encoder.out_dim if n_images else 0)
        self.local = _mlp((width, *local_hidden))
        self.glob = _mlp((width, *local_hidden))
        self.score = _mlp((2 * local_hidden[-1], *score_hidden, 1))

    def forward(self, x: torch.Tensor, images: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``(n,)`` of a set ``x`` of shape ``(n, in_dim)`` (and its frames ``(n, k, c, h, w)``);
        the score is ``sigmoid(logit)``."""
        if self.encoder is not None:
            n, k = images.shape[:2]
            codes = self.encoder(images.reshape(n * k, *images.shape[2:])).reshape(n, -1)
            x = torch.cat([x, codes], 1)
        local = self.local(x)
        context = self.glob(x).mean(0, keepdim=True).expand(x.shape[0], -1)
        return self.score(torch.cat([local, context], 1)).squeeze(-1)


def _widths(name: str, value) -> tuple[int, ...]:
    try:
        out = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of positive widths, got {value!r}") from None
    if not out or any(v <= 0 for v in out) or out != tuple(value):
        raise ValueError(f"{name} must be a non-empty sequence of positive integer widths, got {value!r}")
    return out


class NERSSampler(PERSampler):
    """PER's tree, IS weights and max-priority insertion, with priorities set by the NERS network.

    :meth:`update` takes the batch's TD errors and Q-values, scores the fresh
    items as one set and writes the scores as their raw priorities; only the
    sampled items change.  :meth:`on_episode_end` trains the network (Algorithm 1's
    schedule; :meth:`on_evaluation` under ``schedule="evaluation"``).  The
    network lives on the CPU and is built when the feature source is set
    (its input width depends on the fields); its initial weights come from a
    seed drawn from the sampler's generator at construction.
    """

    name = "ners"

    def __init__(
        self,
        capacity: int,
        alpha: float = ALPHA,
        beta: float = BETA0,
        normalise: str = "global",
        seed=None,
        *,
        sample_size: int = SAMPLE_SIZE,
        lr: float = LEARNING_RATE,
        baseline: str = "previous",
        schedule: str = "episode",
        local_hidden=LOCAL_HIDDEN,
        score_hidden=SCORE_HIDDEN,
        features: FeatureSource | None = None,
    ):
        if baseline not in BASELINES:
            raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
        if isinstance(sample_size, bool) or not isinstance(sample_size, (int, np.integer)) or sample_size <= 0:
            raise ValueError(f"sample_size must be a positive integer, got {sample_size!r}")
        if not (isinstance(lr, (int, float)) and 0 < lr < math.inf):
            raise ValueError(f"lr must be a positive number, got {lr!r}")
        self.local_hidden = _widths("local_hidden", local_hidden)
        self.score_hidden = _widths("score_hidden", score_hidden)
        super().__init__(capacity, alpha=alpha, beta=beta, eps=0.0, normalise=normalise, seed=seed,
                         initial_priority=UNSEEN)  # fmt: skip
        self.sample_size, self.lr, self.baseline, self.schedule = int(sample_size), float(lr), baseline, schedule
        self._q = np.full(self.capacity, np.nan)  # last Q-value reported per slot
        self._torch_seed = int(self.rng.integers(2**62))
        self._reference: float | None = None  # return that r^re is measured from (eq. 6)
        self.last_replay_reward = math.nan
        self.train_steps = 0
        self.source: FeatureSource | None = None
        self._fields: tuple = ()
        self._images: tuple = ()
        self.net: NERSNet | None = None
        self.opt: torch.optim.Adam | None = None
        self.start_history()
        if features is not None:
            self.set_feature_source(features)

    def config(self) -> dict:
        return {**super().config(), "sample_size": self.sample_size, "lr": self.lr, "baseline": self.baseline,
                "schedule": self.schedule,
                "local_hidden": list(self.local_hidden), "score_hidden": list(self.score_hidden)}  # fmt: skip

    def memory_bytes(self) -> int:
        """Bytes of PER's arrays and tree, the Q-value reported per slot, and the network's parameters and
        buffers with Adam's moment estimates (none before the feature source is set)."""
        tensors = [] if self.net is None else [*self.net.parameters(), *self.net.buffers()]
        if self.opt is not None:
            tensors += [v for st in self.opt.state.values() for v in st.values() if torch.is_tensor(v)]
        return super().memory_bytes() + self._q.nbytes + sum(t.nelement() * t.element_size() for t in tensors)

    # -- the network -------------------------------------------------------------
    def set_feature_source(self, source: FeatureSource) -> None:
        """Give the source of the transition fields and build the network (once)."""
        fields = tuple((str(k), int(w)) for k, w in source.fields)
        images = tuple((str(k), tuple(int(d) for d in shape)) for k, shape in getattr(source, "images", ()))
        if len({shape for _, shape in images}) > 1:
            raise ValueError(f"NERS's image fields must share one shape, got {images}")
        if self.source is not None and (fields, images) != (self._fields, self._images):
            raise ValueError(f"NERS already has feature fields {self._fields} {self._images}, not {fields} {images}")
        self.source, self._fields, self._images = source, fields, images
        if self.net is None:
            # the network's first weights from the sampler's own seed, on the CPU generator alone (torch.manual_seed
            # would also seed every CUDA generator, which fork_rng(devices=[]) does not restore), restored after
            with torch.random.fork_rng(devices=[]):
                torch.default_generator.manual_seed(self._torch_seed)
                self.net = self._build_net()
            self.opt = torch.optim.Adam(self.net.parameters(), lr=self.lr)

    def _build_net(self) -> NERSNet:
        in_dim = sum(w for _, w in self._fields) + 2  # + |TD error| and Q-value
        shape = self._images[0][1] if self._images else None
        return NERSNet(in_dim, self.local_hidden, self.score_hidden, image_shape=shape, n_images=len(self._images))

    def features(self, slots: np.ndarray, td: np.ndarray, q: np.ndarray) -> SetFeatures:
        """D(I) of eq. 2: a float32 matrix of the source's vector fields, then tanh|TD| and tanh(Q) (App. B),
        and the image fields' frames stacked per item (``None`` without image fields).

        A NaN ``td``/``q`` (none reported since the slot was written) becomes 1.0.
        Raises ``ValueError`` naming the field and the slot of a non-finite value.
        """
        if self.source is None:
            raise ValueError("NERS has no feature source: call set_feature_source() (the 'ners' method gives it "
                             "the replay buffer)")  # fmt: skip
        n = slots.shape[0]
        fields = self.source(slots)
        cols = []
        for name, width in self._fields:
            arr = np.asarray(fields[name], dtype=np.float64).reshape(n, width)
            cols.append(_finite(arr, name, slots))
        td_f = np.where(np.isnan(td), UNSEEN, np.tanh(np.abs(td)))
        q_f = np.where(np.isnan(q), UNSEEN, np.tanh(q))
        cols.append(_finite(td_f.reshape(n, 1), "td_error", slots))
        cols.append(_finite(q_f.reshape(n, 1), "q_value", slots))
        images = None
        if self._images:
            images = np.stack([np.asarray(fields[name], dtype=np.uint8).reshape(n, *shape)
                               for name, shape in self._images], 1)  # fmt: skip
        return SetFeatures(np.concatenate(cols, 1).astype(np.float32), images)

    def _logits(self, feats: SetFeatures | np.ndarray) -> torch.Tensor:
        if not isinstance(feats, SetFeatures):
            feats = SetFeatures(np.asarray(feats, dtype=np.float32))
        images = None if feats.images is None else torch.from_numpy(feats.images)
        return self.net(torch.from_numpy(feats.vector), images)

    def scores(self, feats: SetFeatures | np.ndarray, slots: np.ndarray) -> np.ndarray:
        """Scores in (0, 1) of a set (its :class:`SetFeatures`, or the vector matrix alone without image fields),
        with no gradient; ``ValueError`` naming the slot of a non-finite one."""
        with torch.no_grad():
            s = torch.sigmoid(self._logits(feats)).double().numpy()
        return _finite(s.reshape(-1, 1), "score", slots).reshape(-1)

    # -- protocol ----------------------------------------------------------------
    def _on_add(self, idx, prepared) -> None:
        super()._on_add(idx, prepared)
        self._q[idx] = np.nan

    update_inputs = ("q_values",)
    """:meth:`update` takes the batch's Q-values by keyword: ``update(indices, td_errors, generations,
    q_values=...)``.  Everything (indices, finite TD errors and Q-values, finite features and scores) is
    checked before anything changes; stale items are skipped; the fresh items' TD errors and Q-values are
    recorded and their priorities set to their NERS scores."""

    def _missing_input(self, name: str) -> str:
        return (f"NERS needs the batch's Q-values ({name}=...): the agent must report 'q_values' "
                "in its stats")  # fmt: skip

    def _priorities_from(self, idx, td, inputs) -> np.ndarray:
        """The NERS scores of the fresh items (eq. 3-4) from their features with these TD errors and Q-values."""
        return self.scores(self.features(idx, td, inputs["q_values"]), idx)

    def _store_inputs(self, idx, inputs) -> None:
        self._q[idx] = inputs["q_values"]

    def q_values(self, indices) -> np.ndarray:
        """The last Q-value reported for each slot (NaN if none since it was written)."""
        from .._checks import check_indices

        return self._q[check_indices("indices", indices, self.capacity)].copy()

    def on_episode_end(self, info: dict | None = None) -> None:
        """With ``schedule="episode"`` (Algorithm 1): one REINFORCE step from ``info["return"]``, the return of
        the training episode that just ended (see :meth:`reinforce`); otherwise nothing."""
        if self.schedule == "episode":
            self.reinforce(info, "the training episode's return")

    def on_evaluation(self, info: dict | None = None) -> None:
        """With ``schedule="evaluation"``: one REINFORCE step from ``info["return"]``, the mean evaluation
        return (see :meth:`reinforce`); otherwise nothing."""
        if self.schedule == "evaluation":
            self.reinforce(info, "the mean evaluation return")

    def reinforce(self, info: dict | None, what: str = "a return") -> None:
        """One REINFORCE step (eq. 7) with the replay reward r^re (eq. 6) of ``info["return"]``.

        r^re is the return minus the reference: the previous episode's (or evaluation's) return, or the
        first one's with ``baseline="first"``.  The first call only sets the reference.  I_train is a
        uniform subset (without replacement) of ``sample_size`` of the slots drawn since the previous
        call that still hold a transition drawn then and are sampleable; the record of drawn slots is then
        emptied (Algorithm 1's end-of-episode block, "Empty I").
        """
        ret = None if info is None else info.get("return")
        if isinstance(ret, bool) or not isinstance(ret, (int, float, np.integer, np.floating)) or not np.isfinite(ret):
            raise ValueError(f"NERS needs info['return'], {what}, as a finite number; got {ret!r}")
        ret = float(ret)
        if self._reference is None:
            self._reference = ret
            self.start_history()
            return
        reward = ret - self._reference
        # Algorithm 1's set I (I <- I u I_batch): each slot once, however often drawn, and only while it holds a
        # transition that was drawn (a slot the ring rewrote since holds one that was not)
        drawn = self.drawn_and_held()
        drawn = drawn[self._sampleable[drawn]]
        step = None
        if drawn.shape[0] and self.net is not None and reward != 0.0:
            k = min(self.sample_size, drawn.shape[0])
            pick = drawn[self.rng.choice(drawn.shape[0], size=k, replace=False)]
            logits = self._logits(self.features(pick, self._td[pick], self._q[pick]))
            logp = self.alpha * nn.functional.logsigmoid(logits)
            _finite(logp.detach().double().numpy().reshape(-1, 1), "log score", pick)
            step = -(reward * logp.sum())
        # nothing below can fail
        if step is not None:
            self.opt.zero_grad(set_to_none=True)
            step.backward()
            self.opt.step()
            self.train_steps += 1
        if self.baseline == "previous":
            self._reference = ret
        self.last_replay_reward = reward
        self.start_history()

    # -- state -------------------------------------------------------------------
    def state_dict(self) -> dict:
        state = super().state_dict()
        state["ners"] = {
            "q": self._q.copy(),
            "torch_seed": self._torch_seed,
            "reference": self._reference,
            "last_replay_reward": self.last_replay_reward,
            "train_steps": self.train_steps,
            "fields": None if self.net is None else [list(f) for f in self._fields],
            "images": None if self.net is None else [[k, list(shape)] for k, shape in self._images],
            "net": None if self.net is None else {k: v.clone() for k, v in self.net.state_dict().items()},
            "opt": None if self.opt is None else _clone(self.opt.state_dict()),
        }
        return state

    def _parse_state(self, state: dict) -> dict:
        values = super()._parse_state(state)
        ners = state_value(state, "ners")
        check_keys(ners, self.state_dict()["ners"], "state['ners']")
        q = _state_vector(ners, "q", self.capacity)
        if np.isinf(q).any():
            raise StateError("state['ners']['q'] must hold finite Q-values or NaN")
        if (~np.isnan(q) & (values["_generation"] < 0)).any():
            raise StateError("state['ners']['q'] holds a Q-value on a slot never written")
        seed = _nested(state_int, ners, "torch_seed", 0, 2**62)
        reference = _nested(state_value, ners, "reference")
        if reference is not None and not (isinstance(reference, float) and math.isfinite(reference)):
            raise StateError(f"state['ners']['reference'] must be None or a finite float, got {reference!r}")
        last = _nested(state_value, ners, "last_replay_reward")
        if not isinstance(last, float):
            raise StateError(f"state['ners']['last_replay_reward'] must be a float, got {last!r}")
        steps = _nested(state_int, ners, "train_steps")
        fields, images, net, opt = (_nested(state_value, ners, k) for k in ("fields", "images", "net", "opt"))
        if (net is None) != (self.net is None):
            have = "has" if self.net is not None else "has no"
            raise StateError(f"state['ners']['net'] is {'absent' if net is None else 'present'}, but this sampler "
                             f"{have} network (set the feature source before loading)")  # fmt: skip
        if net is not None:
            if [list(f) for f in self._fields] != fields:
                raise StateError(f"state['ners']['fields'] = {fields} differ from this sampler's {self._fields}")
            if [[k, list(shape)] for k, shape in self._images] != images:
                raise StateError(f"state['ners']['images'] = {images} differ from this sampler's {self._images}")
            if seed != self._torch_seed:
                raise StateError("state['ners']['torch_seed'] differs from this sampler's")
            with torch.random.fork_rng(devices=[]):  # building the probe leaves the global generator alone
                probe_net = self._build_net()
            try:
                probe_net.load_state_dict(net)
            except (RuntimeError, TypeError, KeyError, AttributeError) as err:
                raise StateError(f"state['ners']['net'] does not fit the network: {err}") from None
            if not all(torch.isfinite(p).all() for p in probe_net.parameters()):
                raise StateError("state['ners']['net'] holds a non-finite weight")
            probe_opt = torch.optim.Adam(probe_net.parameters(), lr=self.lr)
            try:
                probe_opt.load_state_dict(_clone(opt))
            except (ValueError, TypeError, KeyError, AttributeError) as err:
                raise StateError(f"state['ners']['opt'] is not this network's Adam state: {err}") from None
            values.update(net=probe_net, opt=probe_opt)
        values.update(_q=q, _torch_seed=seed, _reference=reference, last_replay_reward=last, train_steps=steps)
        return values


def _finite(arr: np.ndarray, name: str, slots: np.ndarray) -> np.ndarray:
    bad = ~np.isfinite(arr)
    if bad.any():
        row, col = (int(v[0]) for v in np.nonzero(bad))
        where = f"[{col}]" if arr.shape[1] > 1 else ""
        raise ValueError(f"NERS {name}{where} of slot {slots[row]} is {arr[row, col]}, not finite")
    return arr


def _nested(read, state, key, *args):
    """``read(state, key, ...)`` with the error naming the field as ``state['ners'][key]``."""
    try:
        return read(state, key, *args)
    except StateError as err:
        msg = str(err).replace("state[", "state['ners'][", 1)
        msg = msg.replace("state must", "state['ners'] must").replace("state lacks", "state['ners'] lacks")
        raise StateError(msg) from None


def _state_vector(state, key: str, n: int) -> np.ndarray:
    v = _nested(state_value, state, key)
    arr = np.asarray(v)
    if arr.dtype.kind != "f" or arr.shape != (n,):
        raise StateError(f"state['ners'][{key!r}] must be a float array of shape ({n},), got {arr.dtype} {arr.shape}")
    return arr.astype(np.float64)


def _clone(obj):
    """A deep copy of an optimiser state (tensors cloned)."""
    if isinstance(obj, torch.Tensor):
        return obj.clone()
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clone(v) for v in obj]
    return obj


# -- the "ners" replay method -----------------------------------------------------------------------------
def _build(m, capacity, seed) -> NERSSampler:
    s = m.settings
    return NERSSampler(capacity, alpha=m.alpha, beta=m.beta0, normalise=s.normalise, seed=seed,
                       sample_size=s.ners_sample_size,
                       lr=s.ners_lr, baseline=s.ners_baseline, schedule=s.ners_schedule, local_hidden=s.ners_local,
                       score_hidden=s.ners_score)  # fmt: skip


def _check_env(m, env) -> None:
    """NERS takes vector observations or uint8/bool images."""
    space = env.observation_space
    shape = getattr(space, "shape", None) or ()
    image = len(shape) == 3 and getattr(space, "dtype", None) in (np.uint8, np.bool_)
    if len(shape) != 1 and not image:
        name = env.spec.id if env.spec else "this env"
        raise ValueError(f"NERS takes vector observations or uint8/bool images; {name} has observations of "
                         f"shape {shape}")  # fmt: skip


def _attach(m, buffer) -> None:
    buffer.sampler.set_feature_source(BufferFeatures(buffer))


def _report(buffer, batch, priority, q_values) -> None:
    """The learner's priorities with the batch's Q-values, which NERS's features need."""
    if q_values is None:
        raise ValueError("the ners sampler needs the agent to report 'q_values' (one per batch item)")
    buffer.update(batch, priority, q_values=q_values)


def _describe(s) -> dict:
    return {"baseline": s.ners_baseline, "schedule": s.ners_schedule, "sample_size": s.ners_sample_size,
            "lr": s.ners_lr, "local_hidden": list(s.ners_local), "score_hidden": list(s.ners_score)}  # fmt: skip


METHOD = register(MethodEntry(
    "ners", build=_build, uses_weights=True,  # NERS eq. 5: PER's IS weights, normalised as PER's, beta annealed
    default_alpha=lambda defaults: ALPHA, default_beta0=lambda defaults: BETA0,  # Table B.1, any agent
    check_env=_check_env, attach=_attach, report=_report, describe=_describe,
    reads=("alpha", "beta0", "normalise", "ners_baseline", "ners_schedule", "ners_sample_size", "ners_lr",
           "ners_local", "ners_score"),  # not eps: NERS's scores are its priorities (eps 0)
))  # fmt: skip
"""NERS as a replay method (:mod:`prioritylab.deep.method_table`)."""
