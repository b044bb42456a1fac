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
INT64_MAX = int(np.iinfo(np.int64).max)


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
        if t in (9, 12):
            batch = buf.sample(3, beta=0.5)  # an open diagnostics window
            buf.update(batch, rng.normal(size=3))
    return buf


def continuous_buffer(seed=0):
    """One environment, float actions, PER: the storage of a TD3/SAC agent."""
    buf = ReplayBuffer(16, (3,), (2,), sampler=make_sampler("per", 16, seed=seed), action_dtype=np.float32)
    rng = np.random.default_rng(seed)
    for t in range(20):
        obs = np.full((1, 3), t, dtype=np.float32)
        buf.add(obs, rng.normal(size=(1, 2)), rng.normal(size=1), obs + 1, np.array([t % 6 == 5]),
                np.array([t == 13]))  # fmt: skip
        if t in (8, 15):
            batch = buf.sample(4, beta=0.4)
            buf.update(batch, rng.normal(size=4))
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
                    ("huge", np.full(value.shape, 2**62)), ("int64-max", np.full(value.shape, INT64_MAX))]
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
        out += [("minus-5", -5), ("huge", 2**63), ("float", float(value) + 0.5), ("plus-1", value + 1),
                ("int64-max", INT64_MAX)]
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
    ("action", "int64-max"),  # a discrete action is any stored integer
    ("action", "negative"),  # a continuous action
    ("ess", "truncated"),  # one batch fewer: batch sizes are not stored, so another valid window
    ("ages", "reversed"),  # the order of the ages drawn within a window is not used
    ("beta", "nan"),  # batches drawn without a beta
    ("reward", "fraction"),
    ("max_raw", "plus-1"),
    ("since_sort", "plus-1"),
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
            except ValueError as err:
                assert pickle.dumps(target.state_dict()) == before, (path, label)
                assert f"'{path[-1]}'" in str(err), f"{path} {label}: the message does not name the field: {err}"
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


def test_every_corrupted_continuous_buffer_field_is_rejected():
    """Float actions: a NaN or infinite action is refused like a NaN observation."""
    assert check_all(continuous_buffer, continuous_buffer) > 100


def assert_rejected(target, state, field):
    """Loading ``state`` raises ValueError naming ``field`` and leaves ``target`` unchanged."""
    before = pickle.dumps(target.state_dict())
    with pytest.raises(ValueError) as info:
        target.load_state_dict(state)
    assert f"'{field}'" in str(info.value), f"the message does not name {field!r}: {info.value}"
    assert pickle.dumps(target.state_dict()) == before


def dict_paths(state, path=()):
    """Path of every dict in a nested state (the state itself, nested dicts, the RNG state)."""
    if isinstance(state, dict):
        yield path
        for k, v in state.items():
            if k != "config":  # settings: compared whole (an extra setting is another configuration)
                yield from dict_paths(v, (*path, k))


def at(state, path):
    for k in path:
        state = state[k]
    return state


TARGETS = {
    **{name: (lambda seed, name=name: filled_sampler(name, seed)) for name in NAMES},
    "buffer": filled_buffer,
    "continuous": continuous_buffer,
}


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_an_unknown_entry_at_any_level_is_rejected(kind):
    make = TARGETS[kind]
    original = make(9).state_dict()
    paths = list(dict_paths(original))
    assert ("rng", "state") in paths or ("sampler", "rng", "state") in paths
    for path in paths:
        state = copy.deepcopy(original)
        at(state, path)["surplus"] = 1
        assert_rejected(make(0), state, "surplus")


@pytest.mark.parametrize("kind", ["per", "buffer"])
def test_rng_leaves_must_be_integers_of_their_range(kind):
    make = TARGETS[kind]
    original = make(9).state_dict()
    rng_path = ("rng",) if kind != "buffer" else ("sampler", "rng")
    tampers = [
        (("state", "state"), "float", lambda v: float(v)),
        (("state", "inc"), "float", lambda v: float(v)),
        (("state", "inc"), "bool", lambda v: True),
        (("uinteger",), "float", lambda v: 0.0),
        (("uinteger",), "negative", lambda v: -1),
        (("has_uint32",), "two", lambda v: 2),
        (("has_uint32",), "float", lambda v: 1.0),
        (("bit_generator",), "other", lambda v: "MT19937"),
    ]
    for leaf, _label, spoil in tampers:
        state = copy.deepcopy(original)
        parent = at(state, rng_path + leaf[:-1])
        parent[leaf[-1]] = spoil(parent[leaf[-1]])
        assert_rejected(make(0), state, leaf[-1])


@pytest.mark.parametrize("name", NAMES)
def test_a_link_to_a_never_written_slot_is_rejected(name):
    state = filled_sampler(name, 9).state_dict()
    assert state["generation"][12] == -1 and state["prev"][2] == 1
    state["prev"][2] = 12  # slot 12 was never written: no write could have linked to it
    assert_rejected(filled_sampler(name), state, "prev")


@pytest.mark.parametrize("name", ["per", "lap", "pser"])
def test_a_zero_priority_is_rejected_where_the_rule_keeps_priorities_positive(name):
    state = filled_sampler(name, 9).state_dict()
    state["raw"][3] = 0.0  # |delta| + eps (eps > 0) or max(|delta|, kappa): never 0
    assert_rejected(filled_sampler(name), state, "raw")
    s = filled_sampler(name)
    before = pickle.dumps(s.state_dict())
    with pytest.raises(ValueError, match=r"priorities\[1\] = 0.0 must be positive"):
        s.set_priorities([2, 3], [1.0, 0.0])
    assert pickle.dumps(s.state_dict()) == before


@pytest.mark.parametrize("key", ["terminated", "truncated"])
def test_an_episode_end_flag_must_match_the_writer(key):
    """Flipping the flag of any one slot (a transition mid-episode, an episode's last transition, a tail,
    an empty slot) breaks what the writer implies: the last transition of an episode, and only it, is
    followed by the episode's tail."""
    original = filled_buffer(9).state_dict()
    for slot in range(original["storage"][key].shape[0]):
        state = copy.deepcopy(original)
        state["storage"][key][slot] ^= True
        other = "truncated" if key == "terminated" else "terminated"
        if original["storage"][other][slot]:
            continue  # an ended step may carry both flags: the writer keeps them as given
        assert_rejected(filled_buffer(), state, key)


def test_sampleable_slots_and_links_must_match_the_writer():
    original = filled_buffer(9).state_dict()
    live = original["sampler"]["sampleable"]
    for slot in range(live.shape[0]):
        state = copy.deepcopy(original)
        state["sampler"]["sampleable"][slot] ^= True
        assert_rejected(filled_buffer(), state, "sampleable")
    linked = np.flatnonzero(original["sampler"]["prev"] >= 0)
    assert linked.shape[0] > 5
    for slot in linked:
        state = copy.deepcopy(original)
        state["sampler"]["prev"][slot] = -1
        state["sampler"]["prev_gen"][slot] = -1  # a consistent unlinked slot for a plain sampler
        assert_rejected(filled_buffer(), state, "prev")


def test_diagnostics_must_be_one_window():
    original = filled_buffer(9).state_dict()
    assert original["diagnostics"]["ess"].shape[0] == 2
    tampers = [
        ("ess", lambda d: d.update(ess=np.full(2, np.nan))),
        ("ess", lambda d: d.update(ess=np.ones(7))),  # more batches than drawn items
        ("ages", lambda d: d.update(ages=d["ages"][:-1])),
        ("ages", lambda d: d.update(ages=np.full_like(d["ages"], 10**6))),  # older than the run
        ("moments", lambda d: d["moments"].__setitem__((0, 1), d["moments"][0, 0] + 1)),  # weights above 1
        ("counts", lambda d: d["counts"].__setitem__(np.flatnonzero(original["storage"]["kind"] == 2)[0], 1)),
        ("beta", lambda d: d.update(ess=np.empty(0), ages=np.empty(0, dtype=np.int64), moments=np.zeros((3, 3)))),
    ]
    for field, spoil in tampers:
        state = copy.deepcopy(original)
        spoil(state["diagnostics"])
        assert_rejected(filled_buffer(), state, field)


def ring_order_reference(buf, storage, writer, gen):
    """The ring rule read slot by slot: the first slot (environment by environment, then by position) that
    neither follows an empty slot as its ring's first step nor continues the slot before it; None if all do."""
    from prioritylab.replay.kernels import EMPTY, TAIL, TRANSITION

    kind, ep_step, episode, seg = storage["kind"], storage["ep_step"], storage["episode"], buf.seg
    for e in range(buf.num_envs):
        base, pos = e * seg, int(writer["pos"][e])
        if gen[base : base + seg].max() < 0:
            continue
        for loc in range(seg):
            s, p = base + loc, base + (loc - 1) % seg
            if kind[s] == EMPTY or loc == pos % seg:
                continue
            if kind[p] == EMPTY:
                if loc != 0 or ep_step[s] != 0:
                    return s, "follows an empty slot"
                continue
            follows = episode[p] == episode[s] and ep_step[p] == ep_step[s] - 1 and kind[p] == TRANSITION
            starts = ep_step[s] == 0 and kind[s] == TRANSITION and kind[p] == TAIL
            if not (follows or starts) or gen[p] > gen[s]:
                return s, f"does not continue slot {p}"
    return None


@pytest.mark.parametrize("seed", range(4))
def test_ring_order_check_names_the_first_broken_slot(seed):
    """Random edits of kind, episode, step and generation: the layout check refuses exactly the states the
    slot-by-slot rule refuses, naming the same slot."""
    rng = np.random.default_rng(seed)
    buffers = [filled_buffer(seed), continuous_buffer(seed)]
    compared = 0
    for trial in range(400):
        buf = buffers[trial % 2]
        state = copy.deepcopy(buf.state_dict())
        storage, writer, gen = state["storage"], state["writer"], state["sampler"]["generation"]
        for _ in range(int(rng.integers(1, 3))):
            slot = int(rng.integers(gen.shape[0]))
            key = ["kind", "episode", "ep_step", "generation"][int(rng.integers(4))]
            target = gen if key == "generation" else storage[key]
            target[slot] = int(rng.integers(0, 3)) if key == "kind" else target[slot] + int(rng.choice([-1, 1]))
        expected = ring_order_reference(buf, storage, writer, gen)
        try:
            buf._check_layout(storage, writer, gen)
        except ValueError as err:
            if "of environment " in str(err):
                continue  # the edit also moved a segment's newest slot: refused before its ring is read
            assert expected is not None, f"refused a state whose rings are in order: {err}"
            assert f"slot {expected[0]}" in str(err) and expected[1] in str(err), (str(err), expected)
            compared += 1
        else:
            assert expected is None, f"ring order broken at slot {expected[0]} was accepted"
    assert compared > 100
