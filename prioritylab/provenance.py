"""What a run's recorded settings mean when two runs, or a run and its resumption, are compared.

A run's ``manifest.json`` holds its settings (``config``, and the sampler values they resolved
to, ``method``).  The facts below decide whether two sets of settings describe the same
experiment, and they live here so that the report
(which compares seeds and samplers) and ``train --resume`` (which compares a run with the
command that continues it) read them alike:

* :data:`IGNORED`: bookkeeping settings that change neither what a run learns nor how it
  is scored;
* :data:`ONLY_FOR`: settings (by prefix) that only some samplers read; for the others a
  difference means nothing;
* :data:`BEFORE_IT_EXISTED`: what a run whose manifest predates a setting ran with (:func:`as_before`, for a
  specification that pins it);
* :data:`RESOLVED`: settings compared through the values the manifest's ``method`` resolved;
* the replay's capacity, compared instead of ``buffer_size`` (:func:`capacity`).
"""

from __future__ import annotations

RESUMABLE = ("out", "resume", "overwrite", "restart", "progress", "stop_after", "threads", "device", "checkpoint_every",
             "allow_no_updates")  # fmt: skip
"""Settings a resumption may change: where and how the run is kept (the thread count is checked against the
checkpoint's on its own).  The device may change too, within its kind (one GPU for another): the run continues,
but not bit for bit.  Between the CPU and a GPU a resume is refused, as the agents' noise generator's state is its
device's own (``train`` says so in one line)."""

IGNORED = (*RESUMABLE, "seed", "diagnostics")
"""Settings that do not change what a run learns or how it is scored (when runs are compared with each other,
the seed is what varies, and the diagnostics only log)."""

WEIGHTED = ("per", "pser", "ners")
"""The deep replay methods whose loss takes PER's IS weights (``MethodEntry.uses_weights``)."""

ONLY_FOR = {"replay.ners_": ("ners",), "replay.normalise": WEIGHTED, "replay.kappa": ("lap", "pal"),
            "method.kappa": ("lap", "pal"), "replay.duplicates": ("pser",)}  # fmt: skip
"""Settings (by prefix) that only the named samplers read: for the others they neither split a group nor
stop a resumption, so a run written before such a setting existed (absent from its manifest) stays
comparable.  Every method records its resolved kappa (``method.kappa``), but only LAP's and PAL's losses
use it."""

RESOLVED = ("replay.alpha", "replay.beta0", "replay.eps", "replay.kappa")
"""Config entries that are null when they take the agent's default for the sampler: where the manifest records
the resolved values (its ``method``), those are compared instead, so a default that changes is seen and an
explicit value equal to the default is not a difference."""

BEFORE_IT_EXISTED = (
    ("replay.normalise", "global", None),  # IS weights were divided by the largest over the whole replay
    ("method.normalise", "global", ("sampler", WEIGHTED)),
    ("replay.ners_schedule", "evaluation", None),  # NERS trained at each evaluation
    ("clip_reward", True, ("agent", ("dqn", "ddqn"))),  # DQN and Double DQN clipped every reward (Atari)
    ("log_prob_of", "scaled", ("agent", ("sac",))),  # SAC's entropy was that of the action in the env's range
    ("replay.duplicates", "each", ("sampler", ("pser",))),  # PSER applied eq. 10 once per drawn copy of a slot
)
"""``(setting, value, only)``: the value a run ran with when its manifest predates the setting; ``only`` limits
the entry to runs whose ``(key, values)`` matches."""

BETA_END_BEFORE = {"ddqn": 1.0, "td3": 1.0, "sac": 1.0}
"""The IS exponent's value at the end of a run whose manifest predates ``method.beta_end``, by agent: Double
DQN, TD3 and SAC annealed beta to 1 (PER Sec. 3.4); DQN kept it at its ``method.beta0`` (PSER Table 4)."""


def as_before(*keys: str) -> dict:
    """``{key: value}``: the value each setting took before it existed (:data:`BEFORE_IT_EXISTED`), for a
    specification that pins it so that its committed runs reproduce.  ``KeyError`` names a key it lacks."""
    known = {key: value for key, value, _ in BEFORE_IT_EXISTED if not key.startswith("method.")}
    missing = [k for k in keys if k not in known]
    if missing:
        raise KeyError(f"no earlier value is recorded for {', '.join(missing)}")
    return {k: known[k] for k in keys}


def capacity(manifest: dict, settings: dict):
    """The replay's slots in a run: what its manifest records (``replay_capacity``), or for a manifest written
    before the capacity was recorded, what the rule of that time gave, ``min(buffer_size, max(steps, 64))``
    (one slot per step, the episodes' tail slots not counted).  The capacity, not ``buffer_size``, decides what
    a run computes: a run of 60k steps with ``buffer_size`` 60k is the same experiment as one with 1M recorded
    before the rule changed."""
    recorded_capacity = manifest.get("replay_capacity")
    if recorded_capacity is not None:
        return recorded_capacity
    size, steps = settings.get("buffer_size"), settings.get("steps")
    if isinstance(size, int) and isinstance(steps, int):
        return min(size, max(steps, 64))
    return size


SLOTS_PER_STEP = 2
"""The most replay slots a run writes per step: its transition, and the tail slot of an episode that ends there
(the episode's final observation, never sampled)."""


def replay_slots(buffer_size: int, steps: int) -> int:
    """The replay's slots in a run of ``steps`` (the rule since runs record ``replay_capacity``): ``buffer_size``,
    or room for all the run writes when it is shorter, at least 64."""
    return min(buffer_size, max(SLOTS_PER_STEP * steps, 64))


def held_whole(capacity: int, steps: int) -> bool:
    """Whether a replay of ``capacity`` slots held all that a run of ``steps`` wrote (none overwritten)."""
    return capacity >= SLOTS_PER_STEP * steps


def flat(config: dict, prefix: str = "") -> dict:
    """A manifest's config with nested settings as ``replay.alpha``."""
    out = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def recorded(manifest: dict) -> dict:
    """A run's settings from its manifest, flat: its ``config`` (``replay.alpha``, ...) and the resolved
    sampler values of its ``method`` (``method.alpha``, ...; then the null-able :data:`RESOLVED` config
    entries are left out), with the settings it predates filled in with the values it ran with, and the
    replay's :func:`capacity` (``replay_capacity``) in place of ``buffer_size``.  ``ValueError`` if the
    manifest has no config."""
    config = manifest.get("config") if isinstance(manifest, dict) else None
    if not isinstance(config, dict):
        raise ValueError("its config is not a mapping of settings")
    settings = flat(config)
    method = manifest.get("method")
    if isinstance(method, dict):
        settings = {k: v for k, v in settings.items() if k not in RESOLVED}
        settings.update(flat(method, "method."))
    for key, value, only in BEFORE_IT_EXISTED:
        if only is None or settings.get(only[0]) in only[1]:
            settings.setdefault(key, value)
    if "method.beta0" in settings and settings.get("sampler") in WEIGHTED:  # beta's end, before it was recorded:
        settings.setdefault("method.beta_end", BETA_END_BEFORE.get(settings.get("agent"), settings["method.beta0"]))
    if "buffer_size" in settings:
        settings["replay_capacity"] = capacity(manifest, settings)
        del settings["buffer_size"]
    return settings


def unread_by(sampler: str) -> tuple[str, ...]:
    """The setting prefixes that ``sampler`` does not read."""
    return tuple(prefix for prefix, samplers in ONLY_FOR.items() if sampler not in samplers)


def changed_settings(saved: dict, now: dict) -> dict[str, tuple]:
    """The settings a resumption would change, ``{key: (saved, now)}``: every setting of the saved run's
    manifest against the resuming command's (both manifests as :func:`recorded` reads them), but the
    :data:`RESUMABLE` ones and those the sampler does not read."""
    old, new = recorded(saved), recorded(now)
    unread = unread_by(str(new.get("sampler")))
    keys = sorted({*old, *new})
    return {k: (old.get(k), new.get(k)) for k in keys
            if k not in RESUMABLE and not k.startswith(unread) and old.get(k) != new.get(k)}  # fmt: skip
