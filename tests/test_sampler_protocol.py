"""The parts of the sampler protocol the deep side relies on: held slots, links, direct priorities,
the history of drawn slots, strict input, IS weights for any finite priorities."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prioritylab import make_sampler
from prioritylab.samplers import is_weights

TREE = ["per", "lap", "pser"]
ALL = ["uniform", *TREE, "greedy-td"]


@pytest.mark.parametrize("name", ALL)
def test_held_slots_are_never_drawn_and_probabilities_renormalise(name):
    s = make_sampler(name, 16, seed=0)
    s.add(np.arange(10))
    if name != "uniform":
        s.update(np.arange(10), np.linspace(0.1, 5.0, 10))
    p_all = s.probabilities()
    s.set_sampleable(np.array([9, 3]), False)
    assert s.num_sampleable == 8
    drawn = np.concatenate([s.sample(64).indices for _ in range(20)])
    assert not np.isin(drawn, [3, 9]).any()
    p = s.probabilities()
    assert p[3] == p[9] == 0.0
    np.testing.assert_allclose(p.sum(), 1.0, rtol=1e-12, atol=0)
    if name in TREE + ["uniform"]:
        keep = np.setdiff1d(np.arange(10), [3, 9])
        np.testing.assert_allclose(p[keep], p_all[keep] / p_all[keep].sum(), rtol=1e-12, atol=0)
    s.set_sampleable(np.array([9, 3]), True)
    np.testing.assert_allclose(s.probabilities(), p_all, rtol=1e-12, atol=0)


def test_per_global_normalisation_ignores_held_slots():
    s = make_sampler("per", 8, seed=0, alpha=1.0, beta=1.0, eps=0.0)
    s.add(np.arange(4))
    s.update(np.arange(4), np.array([1.0, 2.0, 4.0, 0.5]))
    s.set_sampleable(np.array([3]), False)  # the smallest priority, held
    batch = s.sample(32)
    # weight = (P / P_min)^-beta over the sampleable slots: P_min is slot 0's
    np.testing.assert_allclose(batch.weights, 1.0 / s.priorities(batch.indices), rtol=1e-12, atol=0)


@settings(max_examples=80, deadline=None)
@given(
    exps=st.lists(st.integers(-300, 300), min_size=2, max_size=12),
    alpha=st.sampled_from([0.5, 1.0, 2.0, 3.0]),
    beta=st.floats(0.0, 1.0),
    normalise=st.sampled_from(["global", "batch"]),
)
def test_is_weights_stay_in_the_unit_interval_for_any_finite_priorities(exps, alpha, beta, normalise):
    td = np.array([10.0**e for e in exps])
    s = make_sampler("per", 16, seed=0, alpha=alpha, eps=0.0, normalise=normalise)
    s.add(np.arange(td.shape[0]))
    try:
        s.update(np.arange(td.shape[0]), td)
    except ValueError as err:  # a mass beyond the float range is refused, not stored
        assert "overflows" in str(err)
        return
    try:
        batch = s.sample(64, beta=beta)
    except ValueError as err:  # total mass beyond the float range, or every mass below it
        underflow = not s.masses().any()
        assert ("total mass is 0.0" if underflow else "total mass is inf") in str(err)
        return
    assert (batch.weights > 0).all() and (batch.weights <= 1).all()
    w = is_weights(batch.probs, s.size, beta, None)
    assert (w > 0).all() and (w <= 1).all()


def test_the_paper_extremes_give_positive_weights():
    s = make_sampler("per", 4, seed=0, alpha=1.0, eps=0.0)
    s.add(np.arange(2))
    s.update(np.arange(2), np.array([1e300, 1e-300]))
    assert (s.sample(200, beta=1.0).weights > 0).all()


@pytest.mark.parametrize("name", ALL)
def test_set_priorities_takes_the_update_path_and_skips_stale_items(name):
    s = make_sampler(name, 8, seed=0)
    s.add(np.arange(6), episode_start=True)
    gens = s.generations(np.arange(3))
    s.add(np.array([1]), episode_start=True)  # slot 1 overwritten: its score is stale
    s.set_priorities(np.arange(3), np.array([1.5, 7.0, 2.0]), gens)  # at least LAP's kappa = 1
    if name != "uniform":
        assert s.priorities([0, 2]).tolist() == [1.5, 2.0]
        assert s.priorities([1])[0] != 7.0
    with pytest.raises(ValueError, match="non-negative"):
        s.set_priorities(np.arange(2), np.array([1.0, -1.0]))


@pytest.mark.parametrize("kappa", [1.0, 0.01])
def test_lap_keeps_set_and_loaded_priorities_at_kappa_or_above(kappa):
    """LAP's rule max(|delta|, kappa) never gives a priority below kappa (LAP eq. 30), nor may a priority set
    directly or a loaded state: each is refused in one line naming the value, and the sampler is unchanged."""
    s = make_sampler("lap", 8, kappa=kappa, seed=0)
    s.add(np.arange(4), episode_start=True)
    s.set_priorities(np.arange(2), np.array([kappa, 3.0]))  # kappa itself is LAP's least priority
    before = pickle.dumps(s.state_dict())
    with pytest.raises(ValueError) as err:
        s.set_priorities(np.arange(3), np.array([2.0, kappa / 2, 5.0]))
    assert str(err.value) == f"priorities[1] = {kappa / 2} is below kappa={kappa}, the least priority lap's rule gives"
    assert pickle.dumps(s.state_dict()) == before
    state = s.state_dict()
    state["raw"][2] = kappa * 0.999
    other = make_sampler("lap", 8, kappa=kappa, seed=1)
    fresh = pickle.dumps(other.state_dict())
    with pytest.raises(ValueError, match=rf"state\['raw'\] holds {kappa * 0.999} on written slot 2, below kappa="):
        other.load_state_dict(state)
    assert pickle.dumps(other.state_dict()) == fresh


def test_history_records_draws_since_it_started_and_survives_a_checkpoint():
    s = make_sampler("per", 16, seed=0)
    s.add(np.arange(10))
    s.sample(4)
    assert s.history().shape == (0,)
    s.start_history()
    a, b = s.sample(4).indices, s.sample(3).indices
    np.testing.assert_array_equal(s.history(), np.concatenate([a, b]))
    other = make_sampler("per", 16, seed=1)
    other.load_state_dict(pickle.loads(pickle.dumps(s.state_dict())))
    np.testing.assert_array_equal(other.history(), s.history())
    s.start_history()
    assert s.history().shape == (0,)


def test_drawn_and_held_leaves_out_slots_rewritten_since_their_draw_and_survives_a_checkpoint():
    s = make_sampler("per", 8, seed=0)
    s.add(np.arange(8))
    s.start_history()
    first = s.sample(32).indices
    s.add(np.array([5, 6, 7]))
    again = s.sample(2).indices
    held = (set(first.tolist()) - {5, 6, 7}) | set(again.tolist())
    assert s.drawn_and_held().tolist() == sorted(held) and len(held) < 8
    np.testing.assert_array_equal(s.history(), np.concatenate([first, again]))
    np.testing.assert_array_equal(s.history_writes(), [8] * 32 + [11] * 2)
    other = make_sampler("per", 8, seed=1)
    other.load_state_dict(pickle.loads(pickle.dumps(s.state_dict())))
    np.testing.assert_array_equal(other.drawn_and_held(), s.drawn_and_held())
    state = s.state_dict()
    state["history_writes"] = state["history_writes"][::-1].copy()
    with pytest.raises(ValueError, match="non-decreasing"):
        other.load_state_dict(state)


def test_signed_td_errors_are_kept_for_fresh_items_only():
    s = make_sampler("lap", 8, seed=0)
    s.add(np.arange(4))
    gens = s.generations(np.arange(4))
    s.add(np.array([2]))
    s.update(np.arange(4), np.array([-1.5, 0.25, 9.0, -3.0]), gens)
    td = s.td_errors(np.arange(4))
    assert td[0] == -1.5 and td[1] == 0.25 and np.isnan(td[2]) and td[3] == -3.0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: s.update(np.array([2**64 - 1], dtype=np.uint64), [1.0]), "18446744073709551615"),
        (lambda s: s.update([0, 1, 2, 3], np.ones((2, 2))), "shape"),
        (lambda s: s.update([0, 1], [1.0, 2.0], generations=np.array([0.5, 1.0])), "integers"),
        (lambda s: s.add([5, 6], episode_start=np.zeros((2, 2), dtype=bool)), "shape"),
        (lambda s: s.add([5, 6], prev=[4, 99]), r"prev\[1\] = 99"),
        (lambda s: s.add([5, 6], prev=[4, 12]), r"prev\[1\] = 12 points at an empty slot"),
        (lambda s: s.set_sampleable([0, 12], False), "empty slot"),
        (lambda s: s.set_priorities([0], [np.inf]), "finite"),
    ],
)
def test_strict_input_names_the_value_and_changes_nothing(call, match):
    s = make_sampler("pser", 16, seed=0)
    s.add(np.arange(5))
    before = pickle.dumps(s.state_dict())
    with pytest.raises(ValueError, match=match):
        call(s)
    assert pickle.dumps(s.state_dict()) == before


def test_links_within_one_call_point_at_the_new_write():
    s = make_sampler("pser", 8, seed=0, rho=0.5, window=3, alpha=1.0, eps=0.0, eta=0.0)
    s.add(np.array([0, 1, 2]), prev=np.array([-1, 0, 1]))
    s.update([2], [8.0])
    np.testing.assert_array_equal(s.priorities([0, 1, 2]), [2.0, 4.0, 8.0])
    s.add(np.array([0]), prev=np.array([-1]))  # slot 0 rewritten: slot 1's link is stale
    s.update([0], [0.5])
    s.update([2], [16.0])  # reaches slot 1 (8), stops before slot 0 (a link would have set 4)
    np.testing.assert_array_equal(s.priorities([0, 1, 2]), [0.5, 8.0, 16.0])
    np.testing.assert_array_equal(s.predecessors([0, 1, 2]), [-1, -1, 1])


def test_a_sampler_with_extra_update_inputs_takes_them_through_the_one_update_path():
    from prioritylab.samplers.per import PERSampler

    class Scored(PERSampler):
        """Priorities from an extra per-item input, as a learned sampler's scores."""

        name = "scored"
        update_inputs = ("score",)

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.last = np.full(self.capacity, np.nan)

        def _priorities_from(self, idx, td, inputs):
            return np.abs(td) * inputs["score"]

        def _store_inputs(self, idx, inputs):
            self.last[idx] = inputs["score"]

    s = Scored(8, alpha=1.0, eps=0.0, seed=0)
    s.add(np.arange(6))
    gens = s.generations(np.arange(3))
    s.add(np.array([1]))  # slot 1 overwritten: its item is stale
    s.update(np.arange(3), np.array([-2.0, 5.0, 3.0]), gens, score=np.array([0.5, 9.0, 2.0]))
    assert s.priorities([0, 2]).tolist() == [1.0, 6.0]
    assert s.priorities([1])[0] != 45.0
    assert s.td_errors([0, 2]).tolist() == [-2.0, 3.0] and np.isnan(s.td_errors([1])[0])
    assert s.last[[0, 2]].tolist() == [0.5, 2.0] and np.isnan(s.last[1])
    assert s.masses()[[0, 2]].tolist() == [1.0, 6.0]
    before = pickle.dumps(s.state_dict())
    with pytest.raises(ValueError, match=r"scored's update needs score="):
        s.update([3], [1.0])
    with pytest.raises(ValueError, match=r"score\[1\] = nan \(slot 4\) must be finite"):
        s.update([3, 4], [1.0, 1.0], score=[1.0, np.nan])
    with pytest.raises(ValueError, match=r"score must have shape \(2,\)"):
        s.update([3, 4], [1.0, 1.0], score=[1.0])
    with pytest.raises(TypeError, match="unexpected keyword argument 'other'"):
        s.update([3], [1.0], score=[1.0], other=[1.0])
    assert pickle.dumps(s.state_dict()) == before
    with pytest.raises(TypeError, match="unexpected keyword argument 'score'"):
        make_sampler("per", 8, seed=0).update([0], [1.0], score=[1.0])


@pytest.mark.parametrize(("probs", "beta", "min_prob", "match"), [
    ([0.1, 0.3], float("nan"), None, r"beta must be in \[0.0, 1.0\], got nan"),
    ([0.1, 0.3], 2.0, None, r"beta must be in \[0.0, 1.0\], got 2.0"),
    ([0.1, 0.3], -1.0, None, r"beta must be in \[0.0, 1.0\], got -1.0"),
    ([0.0, 0.3], 0.5, None, r"probs\[0\] = 0.0 is not a probability in \(0, 1\]"),
    ([-0.1, 0.3], 0.5, None, r"probs\[0\] = -0.1 is not a probability"),
    ([0.1, float("nan")], 0.5, None, r"probs\[1\] = nan"),
    ([0.1, 0.3], 0.5, 0.2, r"min_prob 0.2 is above a drawn probability, 0.1"),
    ([0.1, 0.3], 0.5, float("nan"), r"min_prob must be in \[0.0, 1.0\], got nan"),
])  # fmt: skip
def test_the_public_is_weights_refuses_what_would_give_nan_or_weights_above_one(probs, beta, min_prob, match):
    """Each case once gave NaN weights or a weight above 1 without a word (the samplers check their own inputs
    before they compute weights)."""
    with pytest.raises(ValueError, match=match):
        is_weights(probs, 2, beta, min_prob)


def test_the_public_is_weights_gives_pers_weights_on_good_input():
    probs = np.array([0.1, 0.4])
    np.testing.assert_allclose(is_weights(probs, 2, 0.5, None), [1.0, 0.5], rtol=1e-12)
    np.testing.assert_allclose(is_weights(probs, 2, 0.5, 0.025), [0.5, 0.25], rtol=1e-12)
    assert np.all(is_weights(probs, 2, 0.5, 0.0) == 0.0)  # an item never drawn: an infinite normaliser (documented)
    np.testing.assert_array_equal(is_weights(probs, 2, 0.0, None), [1.0, 1.0])
