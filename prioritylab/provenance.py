"""What a run's recorded settings mean when two runs, or a run and its resumption, are compared.

A run's ``manifest.json`` holds its settings (``config``).  Three facts decide whether two
sets of settings describe the same experiment, and they live here so that the report
(which compares seeds and samplers) and ``train --resume`` (which compares a run with the
command that continues it) read them alike:

* :data:`IGNORED`: bookkeeping settings that change neither what a run learns nor how it
  is scored;
* :data:`ONLY_FOR`: settings (by prefix) that only some samplers read; for the others a
  difference means nothing;
* :data:`BEFORE_IT_EXISTED`: what a run whose manifest predates a setting ran with.
"""

from __future__ import annotations

IGNORED = ("seed", "out", "resume", "overwrite", "progress", "stop_after", "threads", "device", "checkpoint_every",
           "allow_no_updates", "diagnostics")  # fmt: skip
"""Settings that do not change what a run learns or how it is scored."""

RESUMABLE = ("out", "resume", "overwrite", "progress", "stop_after", "threads", "device", "checkpoint_every",
             "allow_no_updates")  # fmt: skip
"""Settings a resumption may change: where and how the run is kept, not what it computes (the thread count is
checked against the checkpoint's on its own)."""

WEIGHTED = ("per", "pser", "ners")
"""The deep replay methods whose loss takes PER's IS weights (``MethodEntry.uses_weights``)."""

ONLY_FOR = {"replay.ners_": ("ners",), "replay.normalise": WEIGHTED}
"""Settings (by prefix) that only the named samplers read: for the others they neither split a group nor
stop a resumption, so a run written before such a setting existed (absent from its manifest) stays
comparable."""

BEFORE_IT_EXISTED = {
    "replay.normalise": "global",  # IS weights were divided by the largest over the whole replay
    "replay.ners_schedule": "evaluation",  # NERS trained at each evaluation
    "clip_reward": True,  # DQN and Double DQN clipped every reward in the TD target (Atari)
}
"""The value a run ran with when its manifest predates the setting."""


def flat(config: dict, prefix: str = "") -> dict:
    """A manifest's config with nested settings as ``replay.alpha``."""
    out = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def recorded(config: dict) -> dict:
    """A manifest's config, flat, with the settings it predates filled in with the values it ran with."""
    settings = flat(config)
    for key, value in BEFORE_IT_EXISTED.items():
        settings.setdefault(key, value)
    return settings


def unread_by(sampler: str) -> tuple[str, ...]:
    """The setting prefixes that ``sampler`` does not read."""
    return tuple(prefix for prefix, samplers in ONLY_FOR.items() if sampler not in samplers)


def changed_settings(saved: dict, now: dict) -> dict[str, tuple]:
    """The settings a resumption would change, ``{key: (saved, now)}``: every setting of the saved run's
    manifest config against the resuming command's, both as recorded, but the :data:`RESUMABLE` ones and those
    the sampler does not read."""
    old, new = recorded(saved), recorded(now)
    unread = unread_by(str(new.get("sampler")))
    keys = sorted({*old, *new})
    return {k: (old.get(k), new.get(k)) for k in keys
            if k not in RESUMABLE and not k.startswith(unread) and old.get(k) != new.get(k)}  # fmt: skip
