"""Samplers: protocol, priority domains, stale updates, PSER decay, state, bad input."""

import pickle

import numpy as np
import pytest
from held_arrays import held_array_bytes
from hypothesis import given
from hypothesis import strategies as st

from prioritylab import SAMPLERS, make_sampler
from prioritylab.samplers.pser import window_from_rho

NAMES = sorted(SAMPLERS)


def _canonical(x):
    """A byte-exact, order-independent encoding of a state (arrays by dtype, shape and bytes)."""
    if isinstance(x, dict):
        return tuple((k, _canonical(x[k])) for k in sorted(x))
    if isinstance(x, np.ndarray):
        return (x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, (list, tuple)):
        return tuple(_canonical(v) for v in x)
    return repr(x)


def state_bytes(sampler):
    return _canonical(sampler.state_dict())


def filled(name, capacity=64, n=40, seed=0, **kw):
    s = make_sampler(name, capacity, seed=seed, **kw)
    s.add(np.arange(n), episode_start=(np.arange(n) % 8 == 0))
    rng = np.random.default_rng(seed + 100)
    s.update(np.arange(n), rng.normal(size=n) * 3)
    return s


@pytest.mark.parametrize("name", NAMES)
def test_protocol_shapes_and_filled_slots(name):
    s = filled(name)
    b = s.sample(16)
    assert b.indices.dtype == np.int64 and b.indices.shape == (16,)
    assert b.probs.shape == b.weights.shape == b.generations.shape == (16,)
    assert np.all(b.indices < 40)
    assert np.all(b.probs > 0) and np.all(b.weights > 0) and np.all(b.weights <= 1.0 + 1e-12)
    assert s.size == 40


@pytest.mark.parametrize("name", ["per", "lap", "pser", "per-rank"])
def test_probabilities_sum_to_one_and_match_drawn_probs(name):
    s = filled(name)
    p = s.probabilities()
    assert abs(p.sum() - 1.0) < 1e-12
    b = s.sample(32)
    np.testing.assert_allclose(b.probs, p[b.indices], rtol=1e-12, atol=0)


@pytest.mark.parametrize(
    ("name", "params"),
    [("per", {}), ("lap", {}), ("lap", {"kappa": 3.0}), ("pser", {}), ("per-rank", {}), ("greedy-td", {})],
)
def test_new_item_is_exactly_as_likely_as_current_max_item(name, params):
    """Regression: alpha applied once; a new item enters at the max raw priority."""
    s = filled(name, capacity=64, n=40, **params)
    s.update([5], [50.0])  # the clear maximum
    s.add([45])
    assert s.priorities([45])[0] == s.priorities([5])[0] == s.max_priority
    if name == "per-rank":  # equal keys take adjacent top ranks, straight after the insert
        assert sorted(s.ranks([5, 45]).tolist()) == [1, 2]
    elif name == "greedy-td":
        assert s.sample(2).indices.tolist() == [5, 45]
    else:
        p = s.probabilities()
        assert p[45] == p[5] == p.max()


def test_lap_new_items_start_at_the_kappa_floor():
    s = make_sampler("lap", 8, kappa=2.5, seed=0)
    s.add([0, 1])
    assert s.priorities([0, 1]).tolist() == [2.5, 2.5]
    s.update([0], [0.1])
    assert s.priorities([0])[0] == 2.5  # the floor: as likely as a new item


def test_per_priorities_are_raw_and_mass_is_alpha_power():
    s = make_sampler("per", 8, alpha=0.5, eps=0.01, seed=0)
    s.add(np.arange(4))
    s.update([0, 1, 2, 3], [-2.0, 0.0, 1.0, 3.0])
    raw = np.array([2.01, 0.01, 1.01, 3.01])
    assert np.array_equal(s.priorities(np.arange(4)), raw)
    expect = raw**0.5 / np.sum(raw**0.5)
    np.testing.assert_allclose(s.probabilities()[:4], expect, rtol=1e-14, atol=0)
    assert s.max_priority == 3.01


def test_lap_priority_is_clipped_at_kappa():
    s = make_sampler("lap", 8, alpha=0.4, kappa=0.5, seed=0)
    s.add(np.arange(3))
    s.update([0, 1, 2], [0.1, -0.5, 2.0])
    assert s.priorities([0, 1, 2]).tolist() == [0.5, 0.5, 2.0]
    m = np.maximum(np.abs([0.1, -0.5, 2.0]) ** 0.4, 0.5**0.4)
    np.testing.assert_allclose(s.probabilities()[:3], m / m.sum(), rtol=1e-14, atol=0)
    assert np.all(s.sample(8).weights == 1.0)


def test_per_is_weights_global_and_batch_normalisation():
    g = filled("per", normalise="global")
    b = filled("per", normalise="batch")
    bg, bb = g.sample(8, beta=0.7), b.sample(8, beta=0.7)
    assert np.array_equal(bg.indices, bb.indices)  # same seed, same tree
    n, p = g.size, g.probabilities()
    w = (n * bg.probs) ** -0.7
    np.testing.assert_allclose(bg.weights, w / (n * p[p > 0].min()) ** -0.7, rtol=1e-12, atol=0)
    np.testing.assert_allclose(bb.weights, w / w.max(), rtol=1e-12, atol=0)
    assert bb.weights.max() == 1.0 and bg.weights.max() <= 1.0
    assert np.all(g.sample(8, beta=0.0).weights == 1.0)


def test_stale_update_is_ignored():
    s = make_sampler("per", 4, seed=0)
    s.add([0, 1, 2, 3])
    b = s.sample(4)
    s.add([b.indices[0]])  # the slot is overwritten after being sampled
    before = s.priorities(b.indices)
    s.update(b.indices, np.full(4, 9.0), b.generations)
    after = s.priorities(b.indices)
    stale = b.indices == b.indices[0]
    assert (~stale).any()  # the batch also holds slots still current: the update must land there
    assert np.array_equal(after[stale], before[stale])
    assert np.all(after[~stale] == 9.0 + s.eps)


def test_uniform_sampler_is_uniform_over_written_slots():
    s = make_sampler("uniform", 100, seed=0)
    s.add([7, 3, 99, 3])
    b = s.sample(4000)
    assert set(np.unique(b.indices).tolist()) == {3, 7, 99}
    assert np.all(b.probs == 1 / 3)


def test_greedy_td_takes_largest():
    s = make_sampler("greedy-td", 10, seed=0)
    s.add(np.arange(5))
    s.update(np.arange(5), [0.1, -3.0, 2.0, 0.0, 3.0])
    assert s.sample(2).indices.tolist() == [1, 4]  # tie 3.0 -> lowest slot first
    assert s.sample(1).indices.tolist() == [1]


# --------------------------------------------------------------------------- PSER


def test_pser_window_from_rho():
    assert window_from_rho(0.4) == 5  # PSER Section 3.2, Atari setting
    assert window_from_rho(0.8) == 20
    with pytest.raises(ValueError, match="rho"):
        make_sampler("pser", 8, rho=1.0)
    with pytest.raises(ValueError, match="rho"):
        make_sampler("pser", 8, rho=0.0)


@pytest.mark.parametrize("mode", ["max", "add"])
def test_pser_decay_along_episode_stops_at_episode_start(mode):
    s = make_sampler("pser", 16, rho=0.5, window=3, eta=0.0, eps=0.0, mode=mode, seed=0)
    starts = np.zeros(10, dtype=bool)
    starts[[0, 4]] = True
    s.add(np.arange(10), episode_start=starts)
    s.update(np.arange(10), np.full(10, 0.1))  # later items decay onto earlier ones
    base = s.priorities(np.arange(10)).copy()
    s.update([6], [8.0])
    got = s.priorities(np.arange(10))
    expect = base.copy()
    expect[6] = 8.0
    for k, slot in ((1, 5), (2, 4)):  # slot 4 starts the episode: no decay onto 3
        if mode == "max":
            expect[slot] = max(8.0 * 0.5**k, base[slot])
        else:
            expect[slot] = min(base[slot] + 8.0 * 0.5**k, 8.0)
    np.testing.assert_allclose(got, expect, rtol=1e-15, atol=0)


def test_pser_add_mode_cuts_a_sum_past_the_largest_priority_to_it():
    """PSER eq. 7: ``p_(t-k) <- min(p_(t-k) + p_t rho^k, p_max)``, p_max the largest priority so far."""
    s = make_sampler("pser", 16, rho=0.5, window=3, eta=0.0, eps=0.0, mode="add", seed=0)
    s.add(np.arange(8))
    s.update(np.arange(8), np.full(8, 0.1))
    s.update([0], [8.0])  # slot 0 starts the episode: nothing decays back from it; p_max is now 8
    s.update([5], [6.0])
    base = s.priorities(np.arange(8)).copy()
    assert base[0] == 8.0 and base[5] == 6.0
    s.update([6], [7.0])  # below p_max: a cap at p_t instead of p_max would show
    expect = base.copy()
    expect[6] = 7.0
    for k, slot in ((1, 5), (2, 4), (3, 3)):
        expect[slot] = min(base[slot] + 7.0 * 0.5**k, 8.0)
    assert expect[5] == 8.0 and expect[4] < 7.0
    np.testing.assert_allclose(s.priorities(np.arange(8)), expect, rtol=1e-15, atol=0)


@pytest.mark.parametrize("window", [1, 3, 4])
def test_pser_decay_reaches_exactly_window_predecessors(window):
    """One long episode: an update of slot 8 reaches slots 8 - k for k = 1..window and no further."""
    s = make_sampler("pser", 16, rho=0.5, window=window, eta=0.0, eps=0.0, seed=0)
    s.add(np.arange(12))
    s.update(np.arange(12), np.zeros(12))
    s.update([8], [8.0])
    expect = np.zeros(12)
    expect[8] = 8.0
    for k in range(1, window + 1):
        expect[8 - k] = 8.0 * 0.5**k
    np.testing.assert_array_equal(s.priorities(np.arange(12)), expect)  # powers of two: exact


def test_pser_decay_never_wraps_past_the_write_position():
    s = make_sampler("pser", 6, rho=0.5, window=5, eta=0.0, eps=0.0, seed=0)
    s.add(np.arange(6))
    s.update(np.arange(6), np.zeros(6))
    s.add([0, 1])  # ring buffer wrapped: slots 0, 1 hold the newest data, slot 2 the oldest
    s.update([0, 1], [0.0, 0.0])
    s.update([2], [4.0])  # its ring predecessor (slot 1) is newer data: no decay
    assert np.array_equal(s.priorities(np.arange(6)), [0, 0, 4, 0, 0, 0])
    s.update([1], [8.0])  # decays back through the write order 0, 5, 4, 3, 2 (window 5)
    assert np.array_equal(s.priorities(np.arange(6)), [4.0, 8.0, 4.0, 0.5, 1.0, 2.0])


def test_pser_anti_collapse_eq10():
    s = make_sampler("pser", 8, rho=0.4, eta=0.7, eps=0.0, seed=0)
    s.add(np.arange(4), episode_start=[True, True, True, True])
    s.update([2], [10.0])
    s.update([2], [1.0])
    assert s.priorities([2])[0] == pytest.approx(7.0)  # max(|delta|, eta * p_old)


def test_pser_current_td_initialisation_decays_at_fill():
    s = make_sampler("pser", 8, rho=0.5, window=5, init="td", eps=0.0, seed=0)
    s.add(np.arange(4), episode_start=[True, False, False, False], td_errors=[0.0, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(s.priorities(np.arange(4)), [0.125, 0.25, 0.5, 1.0], rtol=1e-15, atol=0)
    with pytest.raises(ValueError, match="td_errors"):
        s.add([4])


# --------------------------------------------------------------------------- rank


def test_rank_heap_is_exact_after_refresh_and_a_heap_always():
    s = make_sampler("per-rank", 50, sort_every=10**9, seed=0)
    rng = np.random.default_rng(1)
    s.add(np.arange(50))
    for _ in range(20):
        idx = rng.integers(0, 50, 7)
        s.update(idx, rng.normal(size=7))
        heap = s.order()
        key = s.priorities(heap)
        for i in range(1, s.size):
            assert key[(i - 1) // 2] >= key[i]
    s.refresh()
    keys = s.priorities(s.order())
    assert np.all(np.diff(keys) <= 0)
    assert np.array_equal(np.sort(heap), np.arange(50))


def test_rank_heap_sorts_itself_once_sort_every_items_were_updated():
    """PER Section 3.3: the heap array is re-sorted every ``sort_every`` updated items, without a call."""
    s = make_sampler("per-rank", 64, sort_every=20, seed=0)
    rng = np.random.default_rng(2)
    s.add(np.arange(64))
    s.update(np.arange(64), np.zeros(64))  # 64 items updated: sorted once, the count starts again
    sorted_after = []
    for _ in range(3):  # 8, 16, then 24 items since that sort
        s.update(rng.choice(64, 8, replace=False), rng.normal(size=8))
        sorted_after.append(bool(np.all(np.diff(s.priorities(s.order())) <= 0)))
    assert sorted_after == [False, False, True]


def test_rank_probabilities_are_power_law():
    s = filled("per-rank", alpha=0.7)
    s.refresh()
    p = s.probabilities()
    ranks = s.ranks(np.arange(40))
    expect = ranks**-0.7 / np.sum(np.arange(1, 41) ** -0.7)
    np.testing.assert_allclose(p[:40], expect, rtol=1e-12, atol=0)


def test_rank_refuses_probabilities_as_it_refuses_draws_while_a_slot_is_held():
    """The heap ranks a held slot with the others, so the probabilities would give it a share of the draws."""
    s = filled("per-rank", alpha=0.7)
    s.set_sampleable([3], False)
    for call in (s.probabilities, lambda: s.sample(4)):
        with pytest.raises(ValueError, match=r"held back from sampling \(1 held\)"):
            call()
    s.set_sampleable([3], True)
    assert s.probabilities().sum() == pytest.approx(1.0)


# --------------------------------------------------------------------------- state


@pytest.mark.parametrize("name", NAMES)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["add", "sample", "update"]), st.integers(1, 9), st.integers(0, 10**6)),
        min_size=1,
        max_size=25,
    ),
    cut=st.integers(0, 25),
)
def test_save_load_continue_equals_never_stopping(name, ops, cut):
    def run(sampler, ops_slice, log):
        for op, k, seed in ops_slice:
            r = np.random.default_rng(seed)
            if op == "add":
                sampler.add(r.integers(0, 32, k), episode_start=r.random(k) < 0.3)
            elif sampler.size:
                b = sampler.sample(k)
                log.append((b.indices.copy(), b.probs.copy(), b.weights.copy()))
                if op == "update":
                    sampler.update(b.indices, r.normal(size=k) * 2, b.generations)

    a = make_sampler(name, 32, seed=5)
    log_a = []
    run(a, ops, log_a)
    b = make_sampler(name, 32, seed=5)
    log_b = []
    run(b, ops[:cut], log_b)
    c = make_sampler(name, 32, seed=123)  # different seed: everything must come from the state
    c.load_state_dict(pickle.loads(pickle.dumps(b.state_dict())))
    run(c, ops[cut:], log_b)
    assert len(log_a) == len(log_b)
    for x, y in zip(log_a, log_b, strict=True):
        for u, v in zip(x, y, strict=True):
            assert np.array_equal(u, v)
    assert state_bytes(a) == state_bytes(c)


def test_same_seed_same_results():
    a, b = filled("pser", seed=3), filled("pser", seed=3)
    for _ in range(5):
        x, y = a.sample(8), b.sample(8)
        assert np.array_equal(x.indices, y.indices) and np.array_equal(x.weights, y.weights)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: s.update([0, 1], [0.5, np.nan]), r"td_errors\[1\] = nan"),
        (lambda s: s.update([0, 1], [np.inf, 0.5]), r"td_errors\[0\] = inf"),
        (lambda s: s.update([0, 99], [0.5, 0.5]), r"indices\[1\] = 99 is out of range"),
        (lambda s: s.update([0, 50], [0.5, 0.5]), r"indices\[1\] = 50 points at an empty slot"),
        (lambda s: s.update([0, 1], [0.5]), "shape"),
        (lambda s: s.update([0, 1], np.array([True, False])), "td_errors must be numbers, got dtype bool"),
        (lambda s: s.add([3, 4], td_errors=np.array([True, False])), "td_errors must be numbers, got dtype bool"),
        (lambda s: s.add([3, -1]), r"slots\[1\] = -1 is out of range"),
        (lambda s: s.add([3, 4], episode_start=[True]), None),
        (lambda s: s.sample(0), "batch_size"),
        (lambda s: s.sample(-2), "batch_size"),
        (lambda s: s.sample(2, beta=1.5), "beta"),
        (lambda s: s.sample(2, beta=True), "beta must be a number, got True"),  # float() would read it as 1
        (lambda s: s.sample(2, beta="0.5"), "beta must be a number, got '0.5'"),
    ],
)
def test_bad_input_raises_and_leaves_state_unchanged(name, call, match):
    s = filled(name)
    before = state_bytes(s)
    if match is None:  # a length-1 flag broadcasts: valid, both slots marked
        call(s)
        assert s.episode_starts([3, 4]).tolist() == [True, True]
        return
    with pytest.raises(ValueError, match=match):
        call(s)
    assert state_bytes(s) == before


@pytest.mark.parametrize(
    ("name", "params", "match"),
    [
        ("per", {"alpha": -0.1}, "alpha"),
        ("per", {"beta": 1.1}, "beta"),
        ("per", {"beta": -0.1}, "beta"),
        ("per", {"normalise": "max"}, "normalise"),
        ("lap", {"kappa": 0.0}, "kappa"),
        ("per", {"alpha": True}, "alpha must be a number, got True"),
        ("lap", {"kappa": "1"}, "kappa must be a number, got '1'"),
        ("pser", {"rho": np.True_}, "rho must be a number, got "),
        ("lap", {"kappa": -1.0}, "kappa"),
        ("lap", {"kappa": 2.0, "initial_priority": 0.5}, r"initial_priority=0.5 is below kappa=2.0"),
        ("per", {"stratified": "no"}, "stratified must be True or False, got 'no'"),
        ("per-rank", {"stratified": False}, "stratified=False: RankSampler draws by rank segments"),
        ("per", {"seed": "abc"}, "seed must be a non-negative integer, a SeedSequence or a Generator, got 'abc'"),
        ("lap", {"seed": -1}, "seed must be a non-negative integer, a SeedSequence or a Generator, got -1"),
        ("uniform", {"alpha": 0.5}, "^alpha=0.5: sampler 'uniform' does not take 'alpha'$"),
        ("greedy-td", {"alpha": 0.5}, "^alpha=0.5: sampler 'greedy-td' does not take 'alpha'$"),
        ("greedy-td", {"stratified": False}, "stratified=False: GreedyTDSampler draws by rank segments"),
        ("uniform", {"stratified": False}, "^stratified=False: sampler 'uniform' does not take 'stratified'$"),
        ("pser", {"rho": 1.5}, "rho"),
        ("pser", {"mode": "mul"}, "mode"),
        ("per-rank", {"alpha": -1.0}, "alpha"),
        ("per-rank", {"alpha": 400.0}, r"alpha below 358\.0 at this capacity\), got 400\.0"),  # 8^-400: 0
        ("uniform", {}, None),
    ],
)
def test_bad_parameters(name, params, match):
    if match is None:
        for cap in (0, -1):
            with pytest.raises(ValueError, match="capacity"):
                make_sampler(name, cap)
        return
    with pytest.raises(ValueError, match=match):
        make_sampler(name, 8, **params)


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_an_unknown_keyword_is_refused_naming_it_and_the_sampler(name):
    """One line, as the caller spelt the keyword and the sampler: no internal class's name."""
    with pytest.raises(ValueError, match=f"^foo=1: sampler {name!r} does not take 'foo'$"):
        make_sampler(name, 64, foo=1)


def test_a_rank_sampler_gives_positive_is_weights_up_to_the_largest_alpha_it_takes():
    """Ranks' masses r^-alpha: at the largest alpha the capacity allows the last one is still above 0, so the
    global normaliser is finite and every weight positive; past it the sampler is refused (above)."""
    n = 100
    top = -np.log(np.nextafter(0.0, 1.0)) / np.log(n)
    s = make_sampler("per-rank", n, alpha=np.floor(top * 10) / 10, seed=0)
    s.add(np.arange(n), prev=np.full(n, -1))
    s.update(np.arange(n), np.arange(n, dtype=float))
    assert (s.sample(8, beta=0.5).weights > 0).all()
    with pytest.raises(ValueError, match="alpha below"):
        make_sampler("per-rank", n, alpha=np.ceil(top * 10) / 10 + 1.0)


@pytest.mark.parametrize("name", ["per-rank", "greedy-td"])
def test_samplers_without_a_tree_refuse_total_and_masses_in_one_line(name):
    s = make_sampler(name, 8, seed=0)
    s.add([0], prev=[-1])
    for read in (lambda: s.total, s.masses):
        with pytest.raises(ValueError, match="keeps no sampling masses; read probabilities"):
            read()
    assert s.probabilities()[0] == 1.0


def test_empty_sampler_and_unknown_name():
    for name in NAMES:
        with pytest.raises(ValueError, match="empty"):
            make_sampler(name, 8, seed=0).sample(2)
    with pytest.raises(ValueError, match="unknown sampler"):
        make_sampler("prioritised", 8)


def test_overflowing_priority_is_rejected_without_change():
    s = make_sampler("per", 8, alpha=2.0, seed=0)
    s.add(np.arange(4))
    before = state_bytes(s)
    with pytest.raises(ValueError, match=r"td_errors\[1\] = 1e\+200 overflows"):
        s.update([0, 1], [1.0, 1e200])
    assert state_bytes(s) == before


def test_global_normalisation_skips_items_that_are_never_drawn():
    """With eps = 0 a zero TD error gives mass 0: never drawn, so it does not set the normaliser;
    the largest weight is that of the smallest positive mass (here slot 1, alpha = 0.6)."""
    s = make_sampler("per", 8, eps=0.0, seed=0)
    s.add(np.arange(3))
    s.update([0, 1, 2], [0.0, 1.0, 2.0])
    b = s.sample(64, beta=1.0)
    assert not (b.indices == 0).any()
    expected = np.where(b.indices == 1, 1.0, (1.0 / 2.0) ** 0.6)  # (P_i / P_min)^-beta
    np.testing.assert_allclose(b.weights, expected, rtol=1e-12, atol=0)
    batch = make_sampler("per", 8, eps=0.0, normalise="batch", seed=0)
    batch.add(np.arange(3))
    batch.update([0, 1, 2], [0.0, 1.0, 2.0])
    assert batch.sample(4).weights.max() == 1.0


# --------------------------------------------------------------------------- atomic calls


@pytest.mark.parametrize("name", ["per", "lap", "pser"])
def test_rejected_add_with_overflowing_td_changes_nothing(name):
    """(Rank-based and greedy TD use |delta| itself, with no power: nothing can overflow.)"""
    s = make_sampler(name, 8, alpha=2.0, init="td", seed=0)
    s.add([0], td_errors=[1.0])
    before = state_bytes(s)
    with pytest.raises(ValueError, match=r"td_errors\[1\] = 1e\+200"):
        s.add([1, 2], td_errors=[1.0, 1e200])
    assert state_bytes(s) == before
    assert s.size == 1


def test_rank_based_checks_only_what_it_computes():
    """per-rank ranks |delta| and never raises a priority to alpha: 1e300 at alpha = 1.3 is a valid
    priority (its power would overflow), through update, set_priorities, add(init="td") and a reload."""
    s = make_sampler("per-rank", 8, alpha=1.3, seed=0)
    s.add(np.arange(4))
    s.update([0], [1e300])
    s.set_priorities([1], [1e299])
    assert s.ranks([0, 1]).tolist() == [1, 2]
    td = make_sampler("per-rank", 8, alpha=1.3, init="td", seed=0)
    td.add([0, 1], td_errors=[1e300, 1.0])
    assert td.max_priority == 1e300
    other = make_sampler("per-rank", 8, alpha=1.3, seed=1)
    other.load_state_dict(pickle.loads(pickle.dumps(s.state_dict())))
    assert state_bytes(other) == state_bytes(s)


@pytest.mark.parametrize("name", NAMES)
def test_empty_add_and_update_are_no_ops(name):
    s = filled(name)
    before = state_bytes(s)
    s.add([])
    s.update([], [])
    assert state_bytes(s) == before


def test_stale_items_never_reject_a_call():
    s = make_sampler("per", 4, alpha=2.0, seed=0)
    s.add([0, 1])
    b = s.sample(2)
    s.add([0, 1])  # both overwritten: the update is stale, even an overflowing one
    s.update(b.indices, [1e200, 1e200], b.generations)
    assert s.priorities([0, 1]).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("name", ["per", "lap", "pser"])
def test_update_whose_total_mass_would_overflow_is_refused_without_change(name):
    """Each mass is finite, their sum is not: refused before writing, and the sampler still samples and
    its state loads back.  One such priority alone is accepted."""
    s = make_sampler(name, 8, alpha=1.0, seed=0)
    s.add([0, 1, 2], episode_start=True)
    before = state_bytes(s)
    for call in (lambda: s.update([1, 2], [1e308, 1e308]), lambda: s.set_priorities([1, 2], [1e308, 1e308])):
        with pytest.raises(ValueError, match=r"\[0\] = 1e\+308: the total sampling mass overflows"):
            call()
        assert state_bytes(s) == before
    s.update([1], [1e308])
    assert np.isfinite(s.total)
    s.sample(4)
    other = make_sampler(name, 8, alpha=1.0, seed=1)
    other.load_state_dict(pickle.loads(pickle.dumps(s.state_dict())))
    assert other.total == s.total


@pytest.mark.parametrize("name", ["per", "lap", "pser"])
def test_update_of_several_masses_each_below_half_the_range_whose_sum_overflows_is_refused(name):
    """Each mass (6e307) is below half the float range, three of them are not: refused without change."""
    s = make_sampler(name, 8, alpha=1.0, seed=0)
    s.add([0, 1, 2], episode_start=True)
    before = state_bytes(s)
    with pytest.raises(ValueError, match="overflows"):
        s.update([0, 1, 2], [6e307, 6e307, 6e307])
    assert state_bytes(s) == before
    s.update([0, 1], [6e307, 6e307])  # two fit
    assert np.isfinite(s.total)


@pytest.mark.parametrize("name", ["per", "pser", "lap"])
@pytest.mark.parametrize("alpha", [1.0, 2.0, 3.0])  # a smaller alpha needs raw priorities past the float range
@pytest.mark.parametrize("n", [1, 16, 64])
def test_may_overflow_is_true_wherever_the_samplers_own_bound_is(name, alpha, n):
    """A buffer asks :meth:`may_overflow` before every write and guards the write only where it is true, so it must
    never be false where the bound the sampler refuses by is reached (the fast form compares the largest raw
    priority with a limit; the general one sums the tree); well below that bound it is false."""
    span = make_sampler(name, 64, alpha=alpha, seed=0)._decay_span
    at_bound = np.finfo(np.float64).max / 2 / (64 + n * (1 + span))  # every slot at this mass reaches it
    for top, expected in ((at_bound * 1.001, True), (at_bound / 4, False)):
        s = make_sampler(name, 64, alpha=alpha, seed=0)
        s.add(np.arange(64))
        raw = top ** (1 / alpha)
        s.update(np.arange(64), np.full(64, raw))  # every slot at the largest mass: the largest total it allows
        assert type(s)._may_overflow(s, n, None) == expected
        assert s.may_overflow(n) == expected


@pytest.mark.parametrize("name", ["per", "pser"])
def test_add_and_set_sampleable_whose_total_would_overflow_are_refused(name):
    """New slots enter at the max priority, and a held slot adds its mass when it becomes sampleable."""
    s = make_sampler(name, 8, alpha=1.0, seed=0)
    s.add([0, 1], episode_start=True, sampleable=np.array([True, False]))
    s.update([0, 1], [1e308, 1e308])  # slot 1 is held: only slot 0's mass is in the total
    before = state_bytes(s)
    with pytest.raises(ValueError, match=r"adding slots \[2\].*overflows"):
        s.add([2], episode_start=True)
    with pytest.raises(ValueError, match=r"making slots \[1\] sampleable.*overflows"):
        s.set_sampleable([1], True)
    assert state_bytes(s) == before
    s.add([2], episode_start=True, sampleable=False)  # held: no mass in the tree, accepted
    assert np.isfinite(s.total)


def test_pser_decay_counts_towards_the_total():
    """The update's own mass fits; its decay onto the predecessor would overflow the total."""
    s = make_sampler("pser", 8, alpha=1.0, rho=0.9, window=1, eta=0.0, eps=0.0, seed=0)
    s.add([0, 1])
    s.update([0, 1], [0.0, 0.0])
    before = state_bytes(s)
    with pytest.raises(ValueError, match="overflows"):
        s.update([1], [1.5e308])  # slot 0 would decay to 1.35e308: 2.85e308 in all
    assert state_bytes(s) == before
    s.update([1], [0.9e308])
    assert np.isfinite(s.total)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("spoil", "match"),
    [
        (lambda st: st.pop("generation"), "lacks the entry 'generation'"),
        (lambda st: st.update(prev=np.zeros(3, dtype=np.int64)), "prev"),
        (lambda st: st.update(rng={"bit_generator": "MT19937", "state": {}}), "rng"),
        (lambda st: st.update(capacity=65), "capacity"),
        (lambda st: st["config"].update(extra=1), "settings"),
    ],
)
def test_rejected_load_changes_nothing(name, spoil, match):
    assert_load_rejected(name, spoil, match)


def assert_load_rejected(name, spoil, match):
    """Loading a spoiled copy of another sampler's state raises and changes nothing."""
    s = filled(name)
    before = state_bytes(s)
    bad = pickle.loads(pickle.dumps(filled(name, seed=9).state_dict()))
    spoil(bad)
    with pytest.raises(ValueError, match=match):
        s.load_state_dict(bad)
    assert state_bytes(s) == before


def test_loading_into_a_differently_configured_sampler_is_rejected():
    state = filled("per", alpha=0.6).state_dict()
    other = make_sampler("per", 64, alpha=0.7, seed=0)
    with pytest.raises(ValueError, match="settings"):
        other.load_state_dict(state)


@pytest.mark.parametrize("name", ["per", "lap", "greedy-td", "pser", "per-rank"])
def test_update_applies_the_rule_of_the_priorities_module(name):
    """Every sampler's raw priority is its rule's: PER eq. 1, LAP eq. 9, |delta| (greedy, rank),
    written out here independently of prioritylab.priorities."""
    s = make_sampler(name, 8, seed=0)
    td = np.array([0.0, -0.3, 2.0, -7.5, 1e-9])
    expected = {
        "per": np.abs(td) + s.config().get("eps", 0.0),
        "pser": np.abs(td) + s.config().get("eps", 0.0),
        "lap": np.maximum(np.abs(td), s.config().get("kappa", 0.0)),
    }.get(name, np.abs(td))
    assert np.array_equal(s.raw_priority(td), expected)
    with pytest.raises(ValueError, match=r"td\[1\] = nan must be finite"):  # as update refuses it
        s.raw_priority([0.5, np.nan])
    s.add(np.arange(5), episode_start=True)  # no decay between the items
    s.update(np.arange(5), td)
    got = s.priorities(np.arange(5))
    if name == "pser":  # eq. 10: max(|d| + eps, eta * p_old), p_old = the initial max priority 1
        expected = np.maximum(expected, s.eta * 1.0)
    assert np.array_equal(got, expected)
    assert np.array_equal(s.td_errors(np.arange(5)), td)


def test_uniform_and_greedy_probabilities():
    u = make_sampler("uniform", 6, seed=0)
    u.add([4, 1])
    assert u.probabilities().tolist() == [0, 0.5, 0, 0, 0.5, 0]
    g = make_sampler("greedy-td", 6, seed=0)
    g.add([0, 1, 2])
    g.update([0, 1, 2], [0.5, -2.0, 1.0])
    assert g.probabilities().tolist() == [0, 1, 0, 0, 0, 0]


def test_rank_uniform_segments_weights_never_exceed_one():
    s = make_sampler("per-rank", 128, within_segment="uniform", seed=0)
    s.add(np.arange(100))
    s.update(np.arange(100), np.linspace(0, 3, 100))
    s.refresh()
    for _ in range(50):
        assert s.sample(32, beta=1.0).weights.max() <= 1.0


@pytest.mark.parametrize("normalise", ["global", "batch"])
def test_rank_is_weights_follow_from_rank_probabilities(normalise):
    """PER Section 3.4 with P(r) = r^-alpha / H_n: w = (n P(r))^-beta / (n P(n))^-beta = (r / n)^(alpha beta)
    over all stored items ("global"), or divided by the batch's largest weight ("batch")."""
    alpha, beta, n = 0.7, 0.6, 50
    s = make_sampler("per-rank", 64, alpha=alpha, normalise=normalise, seed=4)
    s.add(np.arange(n))
    s.update(np.arange(n), np.random.default_rng(2).permutation(n) + 1.0)
    s.refresh()
    for _ in range(20):
        b = s.sample(8, beta=beta)
        r = s.ranks(b.indices).astype(float)
        h = sum(j**-alpha for j in range(1, n + 1))
        np.testing.assert_allclose(b.probs, r**-alpha / h, rtol=1e-13, atol=0)
        w = (r / n) ** (alpha * beta)
        expect = w if normalise == "global" else w / w.max()
        np.testing.assert_allclose(b.weights, expect, rtol=1e-12, atol=0)


def test_rank_ranks_are_range_checked():
    s = filled("per-rank")
    with pytest.raises(ValueError, match="out of range"):
        s.ranks([-1])
    with pytest.raises(ValueError, match="empty slot"):
        s.ranks([50])


def test_pser_eq10_reads_the_priority_current_when_each_item_is_set():
    """Within one batch, a later item's eta * p_old sees the decay of an earlier item."""
    s = make_sampler("pser", 8, rho=0.5, window=3, eta=0.7, eps=0.0, seed=0)
    s.add(np.arange(3), episode_start=[True, False, False])
    s.update(np.arange(3), np.zeros(3))
    s.update(np.arange(3), np.zeros(3))  # eta * 1.0 collapses: bring everything near 0
    base = s.priorities(np.arange(3)).copy()
    s.update([2, 1], [10.0, 0.0])
    got = s.priorities(np.arange(3))
    assert got[2] == 10.0
    assert got[1] == pytest.approx(0.7 * 5.0)  # decay of slot 2 gave 5, then eq. 10 on slot 1
    assert got[0] == pytest.approx(max(0.7 * 5.0 * 0.5, 10.0 * 0.25, base[0]))


@pytest.mark.parametrize("mode", ["max", "add"])
def test_pser_a_slot_drawn_twice_in_one_batch_is_updated_once(mode):
    """Eq. 10's previous priority is the one the slot held before the update: a slot given twice drops to
    eta * p_old, not eta^2 * p_old, and under ADD its decay is added once; ``duplicates="each"`` keeps the
    compounding rule that the committed PSER runs ran with."""

    def after(duplicates, slots):
        s = make_sampler("pser", 8, rho=0.5, window=2, eta=0.7, eps=0.0, mode=mode, duplicates=duplicates, seed=0)
        s.add(np.arange(3), episode_start=[True, False, False])
        s.update([0, 1, 2], [100.0, 2.0, 10.0])  # slot 0 sets the cap of ADD (the max priority) out of the way
        s.update(slots, np.zeros(len(slots)))
        return s.priorities(np.arange(3)), s.probabilities()

    once, once_p = after("once", [2])
    twice, twice_p = after("once", [2, 2])
    np.testing.assert_array_equal(twice, once)
    np.testing.assert_array_equal(twice_p, once_p)
    assert twice[2] == pytest.approx(7.0)
    each, _ = after("each", [2, 2])
    assert each[2] == pytest.approx(4.9)  # 0.7 * 0.7 * 10
    if mode == "add":
        assert each[1] > once[1]  # the decay of slot 2 added twice


def test_pser_once_keeps_the_scratch_marks_clear():
    """The marks that find a slot's last copy are cleared, so a later add links its stamps as before."""
    s = make_sampler("pser", 8, eta=0.7, seed=0)
    s.add(np.arange(4))
    s.update([1, 3, 1, 1], np.ones(4))
    assert (s._scratch == -1).all()
    with pytest.raises(ValueError, match="duplicates"):
        make_sampler("pser", 8, duplicates="twice")


# --------------------------------------------------------------------------- fused path


@given(top=st.floats(1.0, 1e6), alpha=st.floats(0.05, 2.0))
def test_new_item_matches_the_max_item_for_any_value(top, alpha):
    """(Below the initial max priority 1, a new item enters at 1, above every stored item.)"""
    for name in ("per", "lap", "pser"):
        s = make_sampler(name, 8, alpha=alpha, eps=0.0, seed=0) if name != "lap" else make_sampler(
            name, 8, alpha=alpha, kappa=1e-3, seed=0
        )
        s.add([0, 1])
        s.update([0, 1], [top, top / 3])
        s.add([2])
        p = s.probabilities()
        assert p[2] == p[0]


@pytest.mark.parametrize("name", ["per", "per-rank"])
@pytest.mark.parametrize(
    ("spoil", "match"),
    [
        (lambda st: st.update(filled=np.array([5, 100])), "filled"),
        (lambda st: st.update(filled=np.concatenate([st["filled"], st["filled"][:1]])), "filled"),
        (lambda st: st.update(writes=3), "writes"),
        (lambda st: st.update(max_raw=np.nan), "max_raw"),
        (lambda st: st.update(raw=-st["raw"] - 1.0), "raw"),
    ],
)
def test_inconsistent_states_are_rejected(name, spoil, match):
    assert_load_rejected(name, spoil, match)


@pytest.mark.parametrize("name", ["per", "pser", "lap", "uniform"])
def test_a_state_with_a_td_error_on_an_empty_slot_is_rejected(name):
    """``td_errors`` would give a slot never written a TD error: refused, and the sampler unchanged."""
    s = make_sampler(name, 16, seed=0)
    s.add(np.arange(4))
    state = s.state_dict()
    state["td"] = state["td"].copy()
    state["td"][10] = 3.0
    fresh = make_sampler(name, 16, seed=0)
    before = pickle.dumps(fresh.state_dict())
    with pytest.raises(ValueError, match=r"state\['td'\] holds a TD error for an empty slot"):
        fresh.load_state_dict(state)
    assert pickle.dumps(fresh.state_dict()) == before


def test_the_tree_and_the_schedule_refuse_a_flag_or_a_step_that_is_not_one():
    """``stratified="no"`` read as True, and a NaN or boolean step gave a NaN or step-1 value."""
    from prioritylab import LinearSchedule, SumTree

    tree = SumTree(8)
    tree.update(np.arange(8), np.ones(8))
    with pytest.raises(ValueError, match="stratified must be True or False, got 'no'"):
        tree.sample(4, np.random.default_rng(0), stratified="no")
    beta = LinearSchedule(0.4, 1.0, 100)
    for t in (float("nan"), True):
        with pytest.raises(ValueError, match="t must be a step number"):
            beta(t)
    assert beta(50) == pytest.approx(0.7) and beta(np.int64(100)) == 1.0


def test_inconsistent_rank_order_is_rejected():
    s = filled("per-rank")
    bad = filled("per-rank", seed=9).state_dict()
    bad["heap"] = np.full_like(bad["heap"], 7)
    with pytest.raises(ValueError, match="heap"):
        s.load_state_dict(bad)


def test_empty_samplers_report_zero_probabilities():
    for name in NAMES:
        assert not make_sampler(name, 8, seed=0).probabilities().any()
    with pytest.raises(ValueError, match="batch size"):
        make_sampler("per-rank", 8, within_segment="uniform", seed=0).probabilities()


@pytest.mark.parametrize(("name", "params"), [("per", {"eps": np.inf}), ("lap", {"initial_priority": np.inf})])
def test_infinite_settings_are_rejected(name, params):
    with pytest.raises(ValueError, match="eps|initial_priority"):
        make_sampler(name, 8, **params)


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_memory_bytes_counts_the_per_slot_arrays_and_the_tree(name):
    small, large = make_sampler(name, 1000, seed=0), make_sampler(name, 3000, seed=0)
    per_slot = 8 * 5 + 1 + 8  # stamps, links, link stamps, filled, scratch; flags; TD errors
    assert large.memory_bytes() - small.memory_bytes() >= 2000 * per_slot
    tree = getattr(small, "tree", None)
    if tree is not None:
        assert small.memory_bytes() >= sum(a.nbytes for a in tree.arrays[:3]) + small.priorities(np.arange(1000)).nbytes


@pytest.mark.parametrize(("name", "params"), [*((n, {}) for n in NAMES), ("per-rank", {"within_segment": "uniform"})])
def test_memory_bytes_is_every_array_the_sampler_holds(name, params):
    # the rank sampler's heap, positions, rank masses, CDF and segment bounds; the record of drawn slots
    s = make_sampler(name, 500, seed=0, **params)
    s.add(np.arange(400))
    s.start_history()
    for _ in range(3):
        b = s.sample(32)
        s.update(b.indices, np.linspace(0.1, 2.0, 32), b.generations)
    assert s.history().shape[0] == 96
    assert s.memory_bytes() == held_array_bytes(s)


def test_the_old_import_paths_of_moved_sampler_names_still_work():
    from prioritylab.samplers import base, kernels, priority, state

    assert base.PrioritySampler is priority.PrioritySampler and base.is_weights is priority.is_weights
    assert base.StateError is state.StateError and base.prepare_update is kernels.prepare_update
    with pytest.raises(AttributeError):
        base.no_such_name  # noqa: B018
