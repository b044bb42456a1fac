"""NERS (prioritylab.deep.ners): equivariance of the scores, the REINFORCE update on a toy bandit, priorities of
sampled items only, strict input and state, the replay-reward readings, and training runs with TD3 and SAC."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from held_arrays import held_array_bytes
from hypothesis import given
from hypothesis import strategies as st

from prioritylab.deep import sac, td3
from prioritylab.deep.loop import train
from prioritylab.deep.methods import ReplaySettings
from prioritylab.deep.ners import BufferFeatures, NERSSampler
from prioritylab.replay import ReplayBuffer
from prioritylab.samplers import make_sampler

SMALL = {"local_hidden": (16, 16), "score_hidden": (16,)}


class ToySource:
    """Slot ``i`` has one marker feature ``mark[i]`` and two fixed random features."""

    def __init__(self, mark: np.ndarray, seed: int = 0):
        self.mark = mark.astype(np.float64)
        self.other = np.random.default_rng(seed).normal(size=(mark.shape[0], 2))
        self.fields = (("mark", 1), ("other", 2))

    def __call__(self, indices):
        return {"mark": self.mark[indices, None], "other": self.other[indices]}


def toy_sampler(n=64, seed=0, **kw):
    mark = np.arange(n) % 2
    s = NERSSampler(n, seed=seed, features=ToySource(mark), **{**SMALL, **kw})
    s.add(np.arange(n))
    return s, mark


def draw_and_update(s, k):
    b = s.sample(k, beta=1.0)
    s.update(b.indices, np.ones(k), b.generations, q_values=np.zeros(k))
    return b


@given(n=st.integers(1, 40), seed=st.integers(0, 2**16), data=st.data())
def test_scores_are_permutation_equivariant(n, seed, data):
    s = NERSSampler(64, seed=seed % 7, features=ToySource(np.zeros(64)), **SMALL)
    x = np.random.default_rng(seed).normal(scale=3.0, size=(n, 5)).astype(np.float32)
    perm = np.array(data.draw(st.permutations(range(n))))
    slots = np.arange(n)
    a = s.scores(x, slots)
    b = s.scores(x[perm], slots)
    # Only the mean over the set depends on the order, through float32 summation order: a relative change of at
    # most n * 2^-24 ~ 2.4e-6 in the pooled vector, carried to the sigmoid output by a small network at its
    # initial weights (|weights| <= 1/sqrt(fan_in)) and scaled by sigmoid' <= 1/4.  1e-5 is above that bound and
    # far below the spread of the scores of different items (they differ by ~1e-2 and more).
    np.testing.assert_allclose(b, a[perm], rtol=0, atol=1e-5)
    assert ((a > 0) & (a < 1)).all()


@pytest.mark.parametrize("favoured", [1, 0])
def test_reinforce_raises_the_scores_of_the_items_the_replay_reward_favours(favoured):
    """A contextual bandit: half of the slots carry a marker feature.  The replay reward of an evaluation is the
    share of favoured items (marked, or in the control run unmarked) among those drawn since the last one, minus
    1/2 (a running sum of it is reported as the evaluation return, so eq. 6's difference is exactly that).  After
    300 evaluations the favoured class must score above the other by more than the spread of the scores within a
    class at the start: a learned separation, not the initial noise.  The control run (reward reversed) must move
    the other way, so a sign error or a missing update fails one of the two."""
    # lr above the paper's 1e-4: a few hundred steps; the evaluation schedule, driven by on_evaluation
    s, mark = toy_sampler(64, seed=0, lr=3e-3, sample_size=32, schedule="evaluation")
    good = mark == favoured
    slots = np.arange(64)
    before = s.scores(s.features(slots, s.td_errors(slots), s.q_values(slots)), slots)
    spread = before[~good].std()
    total, rewarded = 0.0, 0
    s.on_evaluation({"return": total})
    for _ in range(300):
        for _ in range(2):
            draw_and_update(s, 16)
        share = good[s.history()].mean() - 0.5
        total += share
        rewarded += share != 0.0  # a zero replay reward has no gradient: no step
        s.on_evaluation({"return": total})
    assert s.train_steps == rewarded > 200
    after = s.scores(s.features(slots, s.td_errors(slots), s.q_values(slots)), slots)
    gap_before = before[good].mean() - before[~good].mean()
    gap_after = after[good].mean() - after[~good].mean()
    assert gap_after - gap_before > spread > 0


def test_only_sampled_items_change_and_new_items_get_the_top_priority():
    s, _ = toy_sampler(64)
    assert (s.priorities(np.arange(64)) == 1.0).all()
    b = draw_and_update(s, 8)
    raw = s.priorities(np.arange(64))
    drawn = np.unique(b.indices)
    others = np.setdiff1d(np.arange(64), drawn)
    assert (raw[others] == 1.0).all()
    assert ((raw[drawn] > 0) & (raw[drawn] < 1)).all()
    np.testing.assert_array_equal(s.td_errors(drawn), 1.0)
    np.testing.assert_array_equal(s.q_values(drawn), 0.0)
    s.add(np.array([drawn[0]]))  # rewritten: the largest priority again, its TD error and Q-value forgotten
    assert s.priorities([drawn[0]])[0] == 1.0 and math.isnan(s.q_values([drawn[0]])[0])


def test_the_tree_draws_in_proportion_to_score_to_the_alpha_with_is_weights():
    s, _ = toy_sampler(16, alpha=0.5)
    draw_and_update(s, 16)
    raw = s.priorities(np.arange(16))
    np.testing.assert_allclose(s.probabilities(), raw**0.5 / (raw**0.5).sum(), rtol=1e-12)
    b = s.sample(8, beta=1.0)
    p = s.probabilities()
    np.testing.assert_allclose(b.weights, p[p > 0].min() / p[b.indices], rtol=1e-9)


def nan_source(field, slot):
    base = ToySource(np.arange(16) % 2)

    def source(indices):
        out = base(indices)
        out[field] = out[field].copy()
        out[field][indices == slot] = np.nan
        return out

    source.fields = base.fields
    return source


def test_non_finite_input_is_refused_naming_the_field_and_slot_before_any_change():
    s = NERSSampler(16, seed=0, features=nan_source("other", 5), **SMALL)
    s.add(np.arange(16))
    state = s.state_dict()
    with pytest.raises(ValueError, match=r"NERS other\[\d\] of slot 5 is nan"):
        s.update(np.array([1, 5, 7]), np.ones(3), q_values=np.zeros(3))
    with pytest.raises(ValueError, match=r"q_values\[1\] = inf \(slot 4\) must be finite"):
        s.update(np.array([3, 4]), np.ones(2), q_values=np.array([0.0, np.inf]))
    with pytest.raises(ValueError, match="must report 'q_values'"):
        s.update(np.array([3, 4]), np.ones(2))
    with pytest.raises(ValueError, match=r"td_errors\[0\] = nan must be finite"):
        s.update(np.array([3]), np.array([np.nan]), q_values=np.zeros(1))
    after = s.state_dict()
    for key in ("raw", "td", "rng"):
        np.testing.assert_equal(after[key], state[key])
    np.testing.assert_equal(after["ners"]["q"], state["ners"]["q"])


def test_a_non_finite_score_is_refused_before_any_change():
    s, _ = toy_sampler(16)
    with torch.no_grad():
        s.net.score[-1].bias.fill_(np.nan)
    raw = s.priorities(np.arange(16))
    with pytest.raises(ValueError, match=r"NERS score of slot 2 is nan"):
        s.update(np.array([2, 3]), np.ones(2), q_values=np.zeros(2))
    np.testing.assert_array_equal(s.priorities(np.arange(16)), raw)
    assert np.isnan(s.td_errors(np.arange(16))).all()


@pytest.mark.parametrize(("baseline", "expected"), [("previous", [2.0, 1.0, -4.0]), ("first", [2.0, 3.0, -1.0])])
def test_replay_reward_against_the_previous_or_the_first_evaluation(baseline, expected):
    s, _ = toy_sampler(16, baseline=baseline, schedule="evaluation")
    s.on_evaluation({"return": 1.0})
    assert math.isnan(s.last_replay_reward) and s.train_steps == 0
    got = []
    for ret in (3.0, 4.0, 0.0):
        draw_and_update(s, 8)
        s.on_evaluation({"return": ret})
        got.append(s.last_replay_reward)
    assert got == expected and s.train_steps == 3
    assert s.history().shape[0] == 0  # restarted at every evaluation
    with pytest.raises(ValueError, match=r"info\['return'\]"):
        s.on_evaluation({"return": float("nan")})


def test_algorithm_1_trains_at_episode_ends_from_the_episode_return():
    s, _ = toy_sampler(16)  # the default schedule: NERS Algorithm 1
    assert s.schedule == "episode" and s.config()["schedule"] == "episode"
    s.on_episode_end({"return": 5.0})  # the first episode sets the reference
    draw_and_update(s, 8)
    s.on_evaluation({"return": 100.0})  # evaluations do not train under this schedule
    assert s.train_steps == 0 and s.history().shape[0] == 8
    s.on_episode_end({"return": 7.0})
    assert s.train_steps == 1 and s.last_replay_reward == 2.0 and s.history().shape[0] == 0  # the set emptied
    draw_and_update(s, 8)
    s.on_episode_end({"return": 4.0})  # against the previous episode's return
    assert s.train_steps == 2 and s.last_replay_reward == -3.0
    e, _ = toy_sampler(16, schedule="evaluation")
    e.on_episode_end({"return": 5.0})
    e.on_episode_end({"return": 9.0})
    assert math.isnan(e.last_replay_reward) and e.train_steps == 0  # episode ends do nothing there
    with pytest.raises(ValueError, match=r"info\['return'\], the training episode's return"):
        s.on_episode_end({"return": float("inf")})
    with pytest.raises(ValueError, match="schedule must be one of"):
        toy_sampler(16, schedule="step")


def test_the_training_subset_is_drawn_from_the_set_of_drawn_slots_each_once():
    """Algorithm 1 keeps a set (I <- I u I_batch): a slot drawn many times is no likelier to be trained on."""
    s, _ = toy_sampler(6, sample_size=32)
    s.on_episode_end({"return": 0.0})
    for _ in range(5):
        draw_and_update(s, 6)  # 30 draws, with replacement, of at most 6 slots
    drawn = s.history()
    assert drawn.shape[0] == 30 and np.unique(drawn).shape[0] < 30
    picked = []
    features = s.features
    s.features = lambda slots, *a: picked.append(np.array(slots)) or features(slots, *a)
    s.on_episode_end({"return": 1.0})
    assert s.train_steps == 1 and sorted(picked[0].tolist()) == np.unique(drawn).tolist()


def test_the_training_subset_leaves_out_slots_the_ring_rewrote_after_their_draw():
    """Algorithm 1's I holds the transitions sampled: a slot rewritten since its draw holds one never drawn."""
    s, _ = toy_sampler(8, sample_size=32)
    s.on_episode_end({"return": 0.0})
    first = draw_and_update(s, 16).indices
    s.add(np.array([0, 1, 2, 3]))  # the ring wraps: four slots now hold new transitions
    again = draw_and_update(s, 2).indices  # a slot drawn again after its rewrite holds a drawn transition
    held = (set(first.tolist()) - {0, 1, 2, 3}) | set(again.tolist())
    assert sorted(held) == s.drawn_and_held().tolist() and set(first.tolist()) & {0, 1, 2, 3} - held
    picked = []
    features = s.features
    s.features = lambda slots, *a: picked.append(np.array(slots)) or features(slots, *a)
    s.on_episode_end({"return": 1.0})
    assert s.train_steps == 1 and sorted(picked[0].tolist()) == sorted(held)


def test_memory_bytes_counts_the_q_values_the_network_and_adam():
    def tensor_bytes(tensors):
        return sum(t.nelement() * t.element_size() for t in tensors if torch.is_tensor(t))

    bare = NERSSampler(64, seed=0, **SMALL)  # no feature source yet: no network
    assert bare.net is None and bare.memory_bytes() == held_array_bytes(bare)
    s, _ = toy_sampler(64)
    s.on_episode_end({"return": 0.0})
    draw_and_update(s, 16)
    s.on_episode_end({"return": 1.0})  # one REINFORCE step: Adam's moments exist
    draw_and_update(s, 16)  # and a record of drawn slots
    assert s.train_steps == 1 and s.history().shape[0] == 16
    net = tensor_bytes(s.net.state_dict().values())
    adam = sum(tensor_bytes(state.values()) for state in s.opt.state_dict()["state"].values())
    assert net > 0 and adam >= 2 * net  # first and second moments of every parameter
    assert s.memory_bytes() == held_array_bytes(s) + net + adam


def test_state_round_trip_continues_identically_and_bad_state_names_the_field():
    a, _ = toy_sampler(32, seed=1)
    a.on_episode_end({"return": 0.0})
    for r in (1.0, 0.5):
        draw_and_update(a, 8)
        a.on_episode_end({"return": r})
    draw_and_update(a, 8)
    state = a.state_dict()
    b = NERSSampler(32, seed=99, features=ToySource(np.arange(32) % 2), **SMALL)
    with pytest.raises(ValueError, match="torch_seed"):
        b.load_state_dict(state)  # another seed built other initial weights
    b = NERSSampler(32, seed=1, features=ToySource(np.arange(32) % 2), **SMALL)
    b.load_state_dict(state)
    for s in (a, b):
        draw_and_update(s, 8)
        s.on_episode_end({"return": 2.0})
    np.testing.assert_array_equal(a.priorities(np.arange(32)), b.priorities(np.arange(32)))
    for k, v in a.net.state_dict().items():
        assert torch.equal(v, b.net.state_dict()[k]), k
    assert a.train_steps == b.train_steps == 3
    assert a.rng.random() == b.rng.random()

    def broken(path, value):
        bad = a.state_dict()
        bad["ners"] = dict(bad["ners"])
        if path == "net":
            bad["ners"]["net"] = {**bad["ners"]["net"], "local.0.weight": torch.zeros(3, 3)}
        else:
            bad["ners"][path] = value
        return bad

    c = NERSSampler(32, seed=1, features=ToySource(np.arange(32) % 2), **SMALL)
    reference = c.state_dict()
    for path, value, message in [
        ("q", np.zeros(5), r"state\['ners'\]\['q'\]"),
        ("reference", "x", r"state\['ners'\]\['reference'\]"),
        ("net", None, r"state\['ners'\]\['net'\] does not fit"),
        ("opt", {"state": {}, "param_groups": []}, r"state\['ners'\]\['opt'\]"),
        ("train_steps", -1, r"state\['ners'\]\['train_steps'\]"),
        ("surplus", 1, r"state\['ners'\] has an unknown entry 'surplus'"),
    ]:
        with pytest.raises(ValueError, match=message):
            c.load_state_dict(broken(path, value))
        np.testing.assert_equal(c.state_dict()["ners"]["q"], reference["ners"]["q"])
    missing = a.state_dict()
    del missing["ners"]
    with pytest.raises(ValueError, match="lacks the entry 'ners'"):
        c.load_state_dict(missing)
    other = NERSSampler(32, seed=1, features=ToySource(np.arange(32) % 2), **{**SMALL, "score_hidden": (8,)})
    with pytest.raises(ValueError, match="settings"):
        other.load_state_dict(state)


def test_image_stacks_are_image_fields_and_other_shapes_are_refused():
    buf = ReplayBuffer(64, (4, 84, 84), (), sampler=make_sampler("uniform", 64, seed=0), frame_stack=4,
                       obs_dtype=np.uint8, action_dtype=np.int64)  # fmt: skip
    src = BufferFeatures(buf)
    assert src.images == (("obs", (4, 84, 84)), ("next_obs", (4, 84, 84)))
    assert src.fields == (("action", 1), ("reward", 1), ("timestep", 1))
    flat = ReplayBuffer(64, (4, 84), (), sampler=make_sampler("uniform", 64, seed=0), obs_dtype=np.float32)
    with pytest.raises(ValueError, match=r"got observation shape \(4, 84\) of float32"):
        BufferFeatures(flat)


def test_image_features_are_encoded_per_item_and_equivariant():
    """Frames go through one shared CNN per item: permuting the set permutes the scores, and changing one item's
    frames changes that item's code alone (and every score, through the pooled context)."""
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, size=(6, 2, 4, 30, 30), dtype=np.uint8)

    class Frames:
        fields = (("reward", 1),)
        images = (("obs", (4, 30, 30)), ("next_obs", (4, 30, 30)))

        def __call__(self, idx):
            return {"reward": np.zeros((idx.shape[0], 1)), "obs": frames[idx, 0], "next_obs": frames[idx, 1]}

    s = NERSSampler(6, seed=0, features=Frames(), **SMALL)
    slots = np.arange(6)
    f = s.features(slots, np.full(6, np.nan), np.full(6, np.nan))
    assert f.vector.shape == (6, 3) and f.images.shape == (6, 2, 4, 30, 30)
    np.testing.assert_array_equal(f.images, frames)
    a = s.scores(f, slots)
    perm = np.array([3, 0, 5, 1, 4, 2])
    b = s.scores(type(f)(f.vector[perm], f.images[perm]), slots)
    np.testing.assert_allclose(b, a[perm], rtol=0, atol=1e-5)  # same float32 pooling bound as above
    with torch.no_grad():
        codes = s.net.encoder(torch.from_numpy(frames[:, 0]))
        frames[2] = 255 - frames[2]
        changed = s.net.encoder(torch.from_numpy(frames[:, 0]))
    assert codes.shape == (6, 32)  # App. B: 256-64-32 after the convolutions
    keep = [0, 1, 3, 4, 5]
    assert torch.equal(changed[keep], codes[keep]) and not torch.equal(changed[2], codes[2])
    c = s.scores(s.features(slots, np.full(6, np.nan), np.full(6, np.nan)), slots)
    assert not np.array_equal(c, a)
    # a REINFORCE step (eq. 7) trains the CNN too
    s.add(slots)
    s.on_episode_end({"return": 0.0})
    b = s.sample(6, beta=1.0)
    s.update(b.indices, np.ones(6), b.generations, q_values=np.zeros(6))
    before = s.net.encoder.conv[0].weight.detach().clone()
    s.on_episode_end({"return": 1.0})
    assert s.train_steps == 1 and not torch.equal(s.net.encoder.conv[0].weight, before)


def test_buffer_features_are_the_stored_fields():
    s = NERSSampler(64, seed=0, **SMALL)
    buf = ReplayBuffer(64, (3,), (2,), sampler=s)
    s.set_feature_source(BufferFeatures(buf, timestep_scale=10.0))
    obs = np.arange(3, dtype=np.float32)
    for t in range(5):
        nxt = obs + 1
        buf.add(obs[None], np.full((1, 2), t, np.float32), np.array([t]), nxt[None], np.array([False]),
                np.array([t == 4]))  # fmt: skip
        obs = nxt
    x = s.features(np.array([2]), np.array([-0.5]), np.array([np.nan]))
    expected = [2, 3, 4, 2, 2, 2, 3, 4, 5, 0.2, np.tanh(0.5), 1.0]
    assert x.images is None
    np.testing.assert_allclose(x.vector[0], expected, rtol=1e-6)


AGENTS = {"td3": (td3.SPEC, td3.TD3Settings), "sac": (sac.SPEC, sac.SACSettings)}
TINY = {"hidden": 32, "batch_size": 32, "eval_episodes": 1, "progress": False, "threads": 1}
TINY_NERS = ReplaySettings(ners_local=(32, 32), ners_score=(32,), ners_sample_size=64)


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_agents_train_with_ners_on_pendulum(agent, tmp_path):
    spec, cls = AGENTS[agent]
    cfg = cls(out=tmp_path, env="Pendulum-v1", sampler="ners", steps=400, start_steps=100, eval_every=100,
              replay=TINY_NERS, **TINY)  # fmt: skip
    folder = train(spec, cfg)
    state = torch.load(folder / "checkpoint.pt", weights_only=False)["buffer"]["sampler"]
    # Algorithm 1: a step at each training episode's end; Pendulum's episodes end at steps 200 and 400, and
    # the first only sets the reference return
    assert state["name"] == "ners" and state["ners"]["train_steps"] == 1
    written = state["generation"] >= 0
    raw = state["raw"][written]
    assert np.isfinite(raw).all() and (raw > 0).all() and (raw <= 1).all() and (raw < 1).any()
    replayed = ~np.isnan(state["ners"]["q"])
    assert replayed.sum() > 0 and (raw[replayed[written]] < 1).all()
    assert all(torch.isfinite(v).all() for v in state["ners"]["net"].values())


def test_stopped_and_resumed_ners_run_equals_the_uninterrupted_one(tmp_path):
    common = {"env": "Pendulum-v1", "sampler": "ners", "steps": 700, "start_steps": 150, "eval_every": 100,
              "replay": TINY_NERS, **TINY}  # fmt: skip
    full = train(td3.SPEC, td3.TD3Settings(out=tmp_path / "full", **common))
    stopped = train(td3.SPEC, td3.TD3Settings(out=tmp_path / "split", stop_after=250, **common))
    assert torch.load(stopped / "checkpoint.pt", weights_only=False)["step"] == 400
    resumed = train(td3.SPEC, td3.TD3Settings(out=tmp_path / "split", resume=True, **common))
    assert (full / "evaluations.csv").read_bytes() == (resumed / "evaluations.csv").read_bytes()
    a = torch.load(full / "checkpoint.pt", weights_only=False)
    b = torch.load(resumed / "checkpoint.pt", weights_only=False)
    sa, sb = a["buffer"]["sampler"], b["buffer"]["sampler"]
    assert sa["ners"]["train_steps"] == 2  # episode ends at 400 and 600 (the one at 200 sets the reference)
    np.testing.assert_array_equal(sa["raw"], sb["raw"])
    for key, value in sa["ners"]["net"].items():
        assert torch.equal(value, sb["ners"]["net"][key]), key
    for key, value in a["agent"]["critic"].items():
        assert torch.equal(value, b["agent"]["critic"][key]), key


def test_the_network_is_seeded_on_the_cpu_generator_alone_and_leaves_the_global_ones_as_they_were(monkeypatch):
    """The first weights come from the sampler's seed, as ``torch.manual_seed`` would give them, with neither the
    global CPU generator nor any CUDA generator touched (a CUDA run's stream stays the one its seed set)."""
    seeded = []
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda seed: seeded.append(seed))
    monkeypatch.setattr(torch.cuda, "manual_seed", lambda seed: seeded.append(seed))
    torch.manual_seed(123)
    seeded.clear()
    before = torch.get_rng_state()
    s, _ = toy_sampler(16, seed=5)
    assert seeded == []
    assert torch.equal(torch.get_rng_state(), before)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(s._torch_seed)
        expected = s._build_net()
    for ours, theirs in zip(s.net.parameters(), expected.parameters(), strict=True):
        assert torch.equal(ours, theirs)
    other, _ = toy_sampler(16, seed=6)
    assert not all(torch.equal(a, b) for a, b in zip(s.net.parameters(), other.net.parameters(), strict=True))
