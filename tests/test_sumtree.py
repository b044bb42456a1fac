"""Sum tree: kernels against a slow NumPy reference, invariants, edge cases, bad input."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from prioritylab import SumTree
from prioritylab.sumtree import FANOUT, tree_descend, tree_sample_one, tree_set


def reference_leaf(leaves: np.ndarray, value: float) -> int:
    """Slow reference: first leaf whose running sum exceeds ``value``."""
    return int(np.searchsorted(np.cumsum(leaves), value, side="right"))


def assert_invariant(tree: SumTree) -> None:
    """Every internal node equals the left-to-right sum of its children, exactly."""
    a = tree.arrays
    for parent in range(a.leaf0):
        first = parent * FANOUT + 1
        s = 0.0
        for j in range(FANOUT):
            s += a.tree[first + j]
        assert a.tree[parent] == s


def state_bytes(tree: SumTree) -> bytes:
    a = tree.arrays
    return a.tree.tobytes() + a.tmin.tobytes() + a.tmax.tobytes()


@pytest.mark.parametrize("capacity", [1, 2, 3, 4, 5, 17, 64, 1000, 4097])
def test_matches_reference_on_seeded_inputs(capacity):
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity, track_max=True)
    leaves = np.zeros(capacity)
    written = np.zeros(capacity, dtype=bool)
    for _ in range(20):
        k = int(rng.integers(1, 2 * capacity + 2))
        idx = rng.integers(0, capacity, size=k)
        val = rng.exponential(size=k) * (rng.random(k) > 0.2)
        tree.update(idx, val)
        for i, v in zip(idx, val, strict=True):  # last value wins, as in the tree
            leaves[i] = v
        written[idx] = True
        assert np.array_equal(np.asarray(tree.leaves), leaves)
        assert math.isclose(tree.total, math.fsum(leaves), rel_tol=1e-12, abs_tol=1e-300)
        assert tree.max == leaves[written].max()
        assert tree.min == leaves[written].min()
        if tree.total > 0:
            values = np.sort(rng.random(64)) * tree.total
            out = np.empty(64, dtype=np.int64)
            mass = np.empty(64)
            tree_descend(tree.arrays.tree, tree.leaf0, tree.depth, values.copy(), out, mass)
            expected = [reference_leaf(leaves, v) for v in values]
            assert out.tolist() == expected
            assert np.array_equal(mass, leaves[out])
    assert_invariant(tree)


def test_duplicate_indices_resolve_to_last_value():
    tree = SumTree(10)
    tree.update([3, 5, 3, 3], [1.0, 2.0, 7.0, 4.0])
    assert tree.priorities([3, 5]).tolist() == [4.0, 2.0]
    assert tree.total == 6.0
    assert_invariant(tree)


def test_capacity_not_power_of_fanout_pads_with_zero_mass():
    tree = SumTree(5)
    tree.update(np.arange(5), np.ones(5))
    rng = np.random.default_rng(0)
    drawn = tree.sample(10_000, rng, stratified=False)
    assert drawn.min() >= 0 and drawn.max() <= 4
    assert np.bincount(drawn, minlength=5).min() > 1500


@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(0, 40), min_size=1, max_size=12),
            st.lists(
                st.one_of(st.just(0.0), st.floats(1e-300, 1e300), st.floats(0.0, 10.0)), min_size=12, max_size=12
            ),
            st.integers(1, 9),
            st.booleans(),
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 2**32 - 1),
    st.sampled_from([(True, True), (True, False), (False, True), (False, False)]),
)
def test_random_operation_sequences_keep_invariants(ops, seed, track):
    """Root equals the sum of leaves; every sampled slot has non-zero mass; min/max trees
    (each on or off) hold the extrema of the written slots, through batched and single updates."""
    tree = SumTree(41, track_min=track[0], track_max=track[1])
    rng = np.random.default_rng(seed)
    written = np.zeros(41, dtype=bool)
    for idx, vals, k, stratified in ops:
        if len(idx) == 1:
            a = tree.arrays
            tree_set(a.tree, a.tmin, a.tmax, a.leaf0, idx[0], vals[0])
        else:
            tree.update(idx, vals[: len(idx)])
        written[idx] = True
        leaves = np.asarray(tree.leaves)
        if track[0]:
            assert tree.min == leaves[written].min()
        if track[1]:
            assert tree.max == leaves[written].max()
        assert math.isclose(tree.total, math.fsum(leaves), rel_tol=1e-12, abs_tol=0.0)
        if tree.total > 0:
            slots, mass = tree.sample_with_mass(k, rng, stratified=stratified)
            assert np.all(leaves[slots] > 0)
            assert np.array_equal(mass, leaves[slots])
            probs = leaves / tree.total
            assert math.isclose(math.fsum(probs), 1.0, rel_tol=1e-12)
        else:
            with pytest.raises(ValueError, match="total mass"):
                tree.sample(k, rng)
    assert_invariant(tree)


@pytest.mark.parametrize("stratified", [True, False])
def test_rounding_edge_never_returns_zero_mass_leaf(stratified):
    """Queries at (or rounded past) the top of the range land on the last positive leaf."""
    cap = 70
    tree = SumTree(cap, track_min=False, track_max=False)
    vals = np.zeros(cap)
    vals[[0, 13, 40]] = [1e-300, 0.1, 0.7]  # trailing zeros, tiny and ordinary masses
    tree.update(np.arange(cap), vals)
    a = tree.arrays
    for top in (a.tree[0], np.nextafter(a.tree[0], np.inf), a.tree[0] * 2):
        values = np.full(8, top)
        out = np.empty(8, dtype=np.int64)
        mass = np.empty(8)
        tree_descend(a.tree, a.leaf0, a.depth, values, out, mass)
        assert set(out.tolist()) == {40}
    rng = np.random.default_rng(1)
    draws = tree.sample(20_000, rng, stratified=stratified)
    assert set(np.unique(draws).tolist()) <= {0, 13, 40}
    assert all(vals[tree_sample_one(a.tree, a.leaf0, a.depth, rng)] > 0 for _ in range(2000))


def test_sample_one_is_the_first_leaf_whose_running_sum_exceeds_u_times_total():
    """The testbed's single draw against the slow reference, with the same uniforms (depth 4 tree)."""
    leaves = np.random.default_rng(3).random(70) * (np.arange(70) % 3 > 0)
    tree = SumTree(70, track_min=False, track_max=False)
    tree.update(np.arange(70), leaves)
    a = tree.arrays
    fast, slow = np.random.default_rng(9), np.random.default_rng(9)
    got = [tree_sample_one(a.tree, a.leaf0, a.depth, fast) for _ in range(5000)]
    expect = [reference_leaf(leaves, slow.random() * a.tree[0]) for _ in range(5000)]
    assert got == expect


def test_stratified_positions_follow_exact_distribution():
    """Position q of a stratified batch is drawn from [q/k, (q+1)/k) of the mass: chi-square per position."""
    leaves = np.array([0.5, 3.0, 0.0, 1.2, 2.3, 0.7, 1.3, 0.0, 2.0, 0.4, 4.1, 1.0])
    tree = SumTree(leaves.size)
    tree.update(np.arange(leaves.size), leaves)
    k, batches = 4, 20_000
    rng = np.random.default_rng(12345)
    counts = np.zeros((k, leaves.size))
    for _ in range(batches):
        counts[np.arange(k), tree.sample(k, rng)] += 1
    cum = np.concatenate([[0.0], np.cumsum(leaves)]) / leaves.sum()
    pvalues = []
    for q in range(k):
        lo, hi = q / k, (q + 1) / k
        p = np.clip(np.minimum(cum[1:], hi) - np.maximum(cum[:-1], lo), 0, None) * k
        support = p > 0
        assert counts[q, ~support].sum() == 0
        pvalues.append(stats.chisquare(counts[q, support], p[support] * batches).pvalue)
    # Bonferroni over the k positions: false-failure probability 1e-3 in total.
    assert min(pvalues) > 1e-3 / k


def test_plain_sampling_matches_proportions_chi_square():
    leaves = np.array([1.0, 0.0, 2.0, 5.0, 0.25, 3.0, 0.0, 0.75])
    tree = SumTree(leaves.size)
    tree.update(np.arange(leaves.size), leaves)
    rng = np.random.default_rng(7)
    draws = tree.sample(200_000, rng, stratified=False)
    counts = np.bincount(draws, minlength=leaves.size)
    support = leaves > 0
    assert counts[~support].sum() == 0
    p = leaves[support] / leaves.sum()
    assert stats.chisquare(counts[support], p * draws.size).pvalue > 1e-3  # false-failure prob. 1e-3


def test_state_dict_round_trip_and_continuation():
    rng = np.random.default_rng(3)
    a = SumTree(300)
    a.update(rng.integers(0, 300, 500), rng.random(500))
    b = SumTree(300)
    b.load_state_dict(a.state_dict())
    assert state_bytes(a) == state_bytes(b)
    r1, r2 = np.random.default_rng(9), np.random.default_rng(9)
    for _ in range(5):
        idx, val = rng.integers(0, 300, 20), rng.random(20)
        a.update(idx, val)
        b.update(idx, val)
        assert np.array_equal(a.sample(16, r1), b.sample(16, r2))
    assert state_bytes(a) == state_bytes(b)


def test_a_state_whose_tree_sums_overflow_is_refused_unchanged():
    """Leaves whose NumPy sum is finite but whose sums in the tree's own order overflow (two halves of the float
    range in one node): loaded, the total was inf and every draw failed, where ``update`` refuses the same leaves."""
    half = np.finfo(float).max / 2
    leaves = np.array([half, 0, 0, 0, half, 0.99 * 2.0**970])
    assert np.isfinite(leaves.sum())
    tree = SumTree(6, track_min=False)
    tree.update(np.arange(6), np.ones(6))
    before = state_bytes(tree)
    with pytest.raises(ValueError, match=r"state\['leaves'\] sum to more than the float range holds"):
        tree.load_state_dict({"capacity": 6, "leaves": leaves, "track_min": False, "track_max": False})
    assert state_bytes(tree) == before and tree.total == 6.0
    with pytest.raises(ValueError, match="overflow"):
        SumTree(6, track_min=False).update(np.arange(6), leaves)


@pytest.mark.parametrize(
    ("indices", "values", "match"),
    [
        ([0, 1], [1.0, np.nan], r"priorities\[1\] = nan"),
        ([0, 1], [np.inf, 1.0], r"priorities\[0\] = inf"),
        ([0, 1], [1.0, -np.inf], r"priorities\[1\] = -inf"),
        ([2, 3, 4], [1.0, 1.0, -0.5], r"priorities\[2\] = -0.5"),
        ([0, 10], [1.0, 1.0], r"indices\[1\] = 10 is out of range"),
        ([-1], [1.0], r"indices\[0\] = -1 is out of range"),
        ([0.5], [1.0], "integers"),
        ([0, 1], [1.0], "shape"),
        ([0], ["2.5"], "priorities must be numbers, got dtype <U3"),
    ],
)
def test_bad_update_raises_and_leaves_tree_unchanged(indices, values, match):
    tree = SumTree(10)
    tree.update(np.arange(10), np.arange(10, dtype=float))
    before = state_bytes(tree)
    with pytest.raises(ValueError, match=match):
        tree.update(indices, values)
    assert state_bytes(tree) == before


def test_update_whose_total_would_overflow_is_refused_without_change():
    """Each value is finite, their sum is not: refused before writing, naming the largest value.
    Replacing a huge value by another keeps the total finite and is accepted."""
    tree = SumTree(8, track_min=True, track_max=True)
    tree.update([0, 1], [1.0, 1e308])
    before = state_bytes(tree)
    with pytest.raises(ValueError, match=r"priorities\[1\] = 1e\+308: the total mass overflows"):
        tree.update([2, 3], [1.0, 1e308])
    assert state_bytes(tree) == before
    tree.update([1, 2], [1.5e308, 1e307])  # the old 1e308 is replaced: 1.6e308 in all
    assert tree.total == 1.0 + 1.5e308 + 1e307 and tree.max == 1.5e308
    other = SumTree(8, track_min=True, track_max=True)
    other.load_state_dict(tree.state_dict())
    assert other.total == tree.total


def test_a_bad_state_is_refused_naming_the_field_and_changes_nothing():
    tree = SumTree(8, track_min=True, track_max=True)
    tree.update([0, 3], [1.0, 2.0])
    good = tree.state_dict()
    before = state_bytes(tree)
    huge = good["leaves"].copy()
    huge[:3] = 1e308
    for change, field in [
        ({"extra": 1}, "unknown"),
        ("drop written", "missing"),
        ({"capacity": 8.0}, "capacity"),
        ({"capacity": True}, "capacity"),
        ({"capacity": 16}, "capacity"),
        ({"track_min": 1}, "track_min"),
        ({"leaves": good["leaves"].astype(str)}, "leaves"),
        ({"leaves": np.full(8, np.nan)}, "leaves"),
        ({"leaves": huge}, "leaves"),
        ({"written": np.ones(8)}, "written"),
        ({"written": np.ones(7, dtype=bool)}, "written"),
        ({"written": np.zeros(8, dtype=bool)}, r"state\['written'\] is False at slot 0, whose leaf is 1\.0"),
    ]:
        if change == "drop written":
            bad = {k: v for k, v in good.items() if k != "written"}
        else:
            bad = {**good, **change}
        with pytest.raises(ValueError, match=field):
            tree.load_state_dict(bad)
        assert state_bytes(tree) == before, change
    with pytest.raises(ValueError, match="dict"):
        tree.load_state_dict([1, 2])
    tree.load_state_dict(good)
    assert state_bytes(tree) == before


@pytest.mark.parametrize("capacity", [0, -3, 2.5, True, "8"])
def test_bad_capacity(capacity):
    with pytest.raises(ValueError, match="capacity"):
        SumTree(capacity)


def test_bad_sample_requests():
    tree = SumTree(8)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="total mass is 0"):
        tree.sample(4, rng)
    tree.update([1], [1.0])
    for k in (0, -1, 1.5):
        with pytest.raises(ValueError, match="batch_size"):
            tree.sample(k, rng)
    with pytest.raises(ValueError, match="Generator"):
        tree.sample(2, np.random.RandomState(0))
    with pytest.raises(ValueError, match="out of range"):
        tree.priorities([8])


def test_extrema_follow_overwrites():
    tree = SumTree(6, track_max=True)
    tree.update([0, 1, 2], [5.0, 1.0, 3.0])
    assert (tree.min, tree.max) == (1.0, 5.0)
    tree.update([1, 0], [4.0, 2.0])
    assert (tree.min, tree.max) == (2.0, 4.0)
    no_extrema = SumTree(6, track_min=False, track_max=False)
    with pytest.raises(ValueError, match="track_min"):
        _ = no_extrema.min
