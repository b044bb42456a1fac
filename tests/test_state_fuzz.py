"""Corrupt each field of each sampler's and the buffer's state: the load raises ValueError and changes nothing.

Every leaf of a state (array or scalar, nested dicts included) is replaced by
each corruption of its type.  The load must raise ``ValueError`` and leave the
object byte-identical, or, for the few corruptions that give another valid
state, accept it as given (listed in ``VALID``).
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from prioritylab import make_sampler
from prioritylab.replay import ReplayBuffer

NAMES = ["uniform", "per", "per-rank", "lap", "pser", "greedy-td"]


def filled_sampler(name, seed=0):
    s = make_sampler(name, 16, seed=seed)
    s.add(np.arange(6), episode_start=np.array([True, False, False, True, False, False]))
    s.add(np.array([6, 7]), prev=np.array([5, -1]))
    if name != "uniform":
        s.update(np.arange(5), np.array([0.5, -2.0, 1.5, 0.0, 3.0]))
    s.set_sampleable(np.array([7]), False)
    s.start_history()
    if name != "per-rank":
        s.sample(3)
    return s


def filled_buffer(seed=0):
    buf = ReplayBuffer(24, (2, 3), (), sampler=make_sampler("pser", 24, seed=seed), num_envs=2,
                       action_dtype=np.int64, frame_stack=2, n_step=2)  # fmt: skip
    rng = np.random.default_rng(seed)
    for t in range(15):
        obs = np.full((2, 2, 3), t, dtype=np.float32)
        buf.add(obs, np.array([t % 3, 1]), rng.normal(size=2), obs + 1, np.array([t % 5 == 4, False]),
                np.array([False, t % 7 == 6]))  # fmt: skip
    return buf


def leaves(state, path=()):
    """(path, value) of every leaf of a nested dict."""
    if isinstance(state, dict):
        for k, v in state.items():
            if path == ("rng",) or k == "config" or k == "rng":
                yield (*path, k), v  # opaque leaves
                continue
            yield from leaves(v, (*path, k))
    else:
        yield path, state


def set_leaf(state, path, value):
    d = state
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value


def corruptions(value):
    """Replacements that break a value of this type."""
    out = [("None", None), ("text", "x"), ("list", [1, 2])]
    if isinstance(value, np.ndarray):
        if value.size:
            out.append(("truncated", value[:-1]))
            out.append(("2-D", np.stack([value, value])))
        if value.dtype.kind in "iu":
            out += [("fraction", value + 0.5), ("minus-5", np.full(value.shape, -5)),
                    ("huge", np.full(value.shape, 2**62))]
            if value.size > 1:
                out.append(("reversed", value[::-1].copy()))
        elif value.dtype.kind == "f":
            for name, v in (("nan", np.nan), ("inf", np.inf), ("negative", -1.0)):
                bad = value.copy()
                if bad.size:
                    bad.reshape(-1)[0] = v
                    out.append((name, bad))
        elif value.dtype.kind == "b":
            out += [("ints", value.astype(np.int64) + 2), ("flipped", ~value)]
    elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        out += [("minus-5", -5), ("huge", 2**63), ("float", float(value) + 0.5), ("plus-1", value + 1)]
    elif isinstance(value, float):
        out += [("nan", np.nan), ("inf", np.inf), ("negative", -1.0)]
    elif isinstance(value, dict):  # rng state or settings
        out += [("empty", {}), ("bad-state", {**value, "state": {"state": -1}} if "state" in value else {"x": 1})]
    elif isinstance(value, str):
        out += [("other", value + "x")]
    return out


# corruptions that give another valid state (same shape and meaning, different content)
VALID = {
    ("td", "nan"),  # NaN marks "no TD error reported since the write"
    ("td", "negative"),  # a signed TD error
    ("history", "None"),  # not recording
    ("history", "reversed"),
    ("history", "truncated"),
    ("history", "list"),  # slots 1 and 2 drawn: another valid history
    ("filled", "reversed"),  # first-write order: any permutation of the written slots is a history
    ("raw", "negative"),  # overwritten below only where it breaks (checked by the rank heap too)
    ("reward", "negative"),
    ("reward", "nan"),  # placeholder, see test: float rewards are data
    ("obs", "negative"),
    ("obs", "nan"),
    ("action", "minus-5"),
    ("action", "huge"),
    ("action", "reversed"),
    ("reward", "fraction"),
    ("episode", "reversed"),
    ("episode", "huge"),
    ("env_step", "reversed"),
    ("env_step", "huge"),
    ("steps", "huge"),
    ("steps", "plus-1"),
    ("next_episode", "huge"),
    ("next_episode", "plus-1"),
    ("max_raw", "plus-1"),
    ("since_sort", "plus-1"),
    ("terminated", "flipped"),
    ("counts", "huge"),  # draw counts of the diagnostics: any non-negative count is a history
    ("ages", "list"),  # two ages drawn so far: another valid window
    ("truncated", "flipped"),
}


def check_all(make, load_target):
    original = make(9).state_dict()
    accepted, rejected = [], 0
    for path, value in list(leaves(original)):
        for label, bad in corruptions(value):
            if pickle.dumps(bad) == pickle.dumps(value) or (
                isinstance(value, np.ndarray) and isinstance(bad, np.ndarray) and np.array_equal(bad, value)
            ):
                continue  # not a change (an empty array, equal settings)
            state = copy.deepcopy(original)
            set_leaf(state, path, bad)
            target = load_target()
            before = pickle.dumps(target.state_dict())
            try:
                target.load_state_dict(state)
            except ValueError:
                assert pickle.dumps(target.state_dict()) == before, (path, label)
                rejected += 1
                continue
            except Exception as err:  # noqa: BLE001 - the point of the test
                pytest.fail(f"{path} {label}: {type(err).__name__} instead of ValueError: {err}")
            accepted.append((path, label))
    unexpected = [(p, lab) for p, lab in accepted if (p[-1], lab) not in VALID]
    assert not unexpected, f"corrupted states accepted: {unexpected}"
    return rejected


@pytest.mark.parametrize("name", NAMES)
def test_every_corrupted_sampler_field_is_rejected(name):
    assert check_all(lambda seed: filled_sampler(name, seed), lambda: filled_sampler(name)) > 30


def test_every_corrupted_buffer_field_is_rejected():
    assert check_all(filled_buffer, filled_buffer) > 100


def test_not_a_dict_is_rejected():
    for target in (filled_sampler("per"), filled_buffer()):
        before = pickle.dumps(target.state_dict())
        for bad in (None, [1, 2], "state", 3):
            with pytest.raises(ValueError):
                target.load_state_dict(bad)
        assert pickle.dumps(target.state_dict()) == before
