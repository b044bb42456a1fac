"""Jitted bookkeeping of the replay writer and the gather of stacks and n-step returns.

Layout (see :mod:`prioritylab.replay.buffer`): environment ``e`` owns the ring
segment ``[e * seg, (e + 1) * seg)`` of the slots.  A slot holds one
observation (its newest frame when frames are stacked) and, for a
*transition* slot, the action taken from it, the reward, and whether the step
terminated or truncated the episode.  The observation after an episode's last
step is written into the next slot as a *tail* slot, which is never sampled.
So the next observation of transition slot ``s`` is the observation in slot
``s + 1`` of the same segment, and every observation is stored once.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..sumtree import prefetch

EMPTY, TRANSITION, TAIL = 0, 1, 2


@njit(cache=True)
def _local(slot, seg):
    return slot % seg, slot - slot % seg


@njit(cache=True)
def plan_writes(
    terminated, truncated, seg, n_step, stack, pos, open_, last, cur_step, episode_of, next_episode,
    kind, ep_step, episode, slots, prev, written_kind, complete, invalid,
):  # fmt: skip
    """Advance the writer for one vectorised step and fill the plan arrays.

    For each environment ``e``: one transition slot (linked to the previous
    step of its episode), then a tail slot if the step ended the episode.
    ``complete`` receives the transition slots whose n-step return and next
    observation are now all written (they may be sampled); ``invalid`` the
    older slots whose frame stack reads a slot overwritten now (they may no
    longer be sampled).  Writer arrays and ``kind``/``ep_step``/``episode``
    are updated in place.  Returns ``(n_slots, n_complete, n_invalid)``.
    """
    n_envs = terminated.shape[0]
    ns = 0
    nc = 0
    ni = 0
    for e in range(n_envs):
        base = e * seg
        ends = terminated[e] or truncated[e]
        n_new = 2 if ends else 1
        for w in range(n_new):
            p = pos[e]
            s = base + p
            # slots whose stack history reaches back to s lose a frame
            for j in range(1, stack):
                q = base + (p + j) % seg
                if kind[q] == TRANSITION and ep_step[q] >= j:
                    invalid[ni] = q
                    ni += 1
            if w == 0:
                if open_[e]:
                    prev[ns] = last[e]
                    es = cur_step[e] + 1
                else:
                    prev[ns] = -1
                    es = 0
                    episode_of[e] = next_episode[0]
                    next_episode[0] += 1
                kind[s] = TRANSITION
            else:
                prev[ns] = -1
                es = cur_step[e] + 1
                kind[s] = TAIL
            ep_step[s] = es
            episode[s] = episode_of[e]
            slots[ns] = s
            written_kind[ns] = kind[s]
            ns += 1
            pos[e] = (p + 1) % seg
            # the transition n steps back now has its whole n-step return and next observation
            if es >= n_step:
                complete[nc] = base + (p - n_step) % seg
                nc += 1
            cur_step[e] = es
            if w == 0:
                last[e] = s
        if ends:
            # the episode's last n - 1 transitions are complete too: their returns stop at its end
            length = cur_step[e]  # the tail's ep_step: transitions have 0 .. length - 1
            for i in range(1, n_step):
                if length - i < 0:
                    break
                complete[nc] = base + (pos[e] - 1 - i) % seg
                nc += 1
            open_[e] = False
        else:
            open_[e] = True
    return ns, nc, ni


@njit(cache=True)
def plan_gather(idx, seg, stack, n_step, gamma, ep_step, reward, terminated, truncated, obs_idx, next_idx, ret, disc,
                steps):  # fmt: skip
    """Slots of each item's observation stack and next-observation stack, its n-step return and discount.

    The stack of slot ``s`` is the ``stack`` newest frames up to ``s`` within its
    episode, padded with the episode's first frame.  The n-step return
    ``sum_{i<m} gamma^i r_{s+i}`` stops after ``m <= n`` steps at the episode's
    end; the discount is ``gamma^m``, or 0 if the episode terminated within
    the ``m`` steps (a truncated episode bootstraps).
    """
    for b in range(idx.shape[0]):
        s = idx[b]
        loc, base = _local(s, seg)
        g = 0.0
        scale = 1.0
        m = 0
        done = False
        while m < n_step:
            q = base + (loc + m) % seg
            g += scale * reward[q]
            scale *= gamma
            m += 1
            if terminated[q]:
                done = True
                break
            if truncated[q]:
                break  # the time limit: bootstrap from the tail's observation
        ret[b] = g
        disc[b] = 0.0 if done else scale
        steps[b] = m
        es = ep_step[s] if stack > 1 else 0  # without stacks no padding: the step in the episode is not read
        for j in range(stack):
            back = min(stack - 1 - j, es)
            obs_idx[b, j] = base + (loc - back) % seg
            back_next = min(stack - 1 - j, es + m)
            next_idx[b, j] = base + (loc + m - back_next) % seg


@njit(cache=True)
def gather_batch(idx, seg, stack, n_step, gamma, ep_step, reward, terminated, truncated, frames, actions,
                 obs_idx, next_idx, obs_out, next_out, act_out, ret, disc, steps):  # fmt: skip
    """:func:`plan_gather` and the copy of the rows it names, in one call.

    ``frames`` is the observation storage seen as ``(capacity, frame_size)``,
    ``actions`` the action storage as ``(capacity, action_size)``; ``obs_out``
    and ``next_out`` receive ``(batch * stack, frame_size)`` rows, ``act_out``
    ``(batch, action_size)``; ``ret`` and ``disc`` may be float32.  The slots
    of every item are prefetched first, so their cache misses overlap instead
    of being met one at a time.
    """
    b_n = idx.shape[0]
    flat_frames = frames.reshape(-1)
    flat_actions = actions.reshape(-1)
    fsize = frames.shape[1]
    asize = actions.shape[1]
    for b in range(b_n):
        s = idx[b]
        if stack > 1:
            prefetch(ep_step, s)
        prefetch(reward, s)
        prefetch(terminated, s)
        prefetch(truncated, s)
        if asize:
            prefetch(flat_actions, s * asize)
    plan_gather(idx, seg, stack, n_step, gamma, ep_step, reward, terminated, truncated, obs_idx, next_idx, ret, disc,
                steps)  # fmt: skip
    if fsize:
        for b in range(b_n):
            for j in range(stack):
                prefetch(flat_frames, obs_idx[b, j] * fsize)
                prefetch(flat_frames, next_idx[b, j] * fsize)
    for b in range(b_n):
        for j in range(stack):
            row = b * stack + j
            q = obs_idx[b, j]
            r = next_idx[b, j]
            for f in range(fsize):
                obs_out[row, f] = frames[q, f]
            for f in range(fsize):
                next_out[row, f] = frames[r, f]
        s = idx[b]
        for a in range(asize):
            act_out[b, a] = actions[s, a]


@njit(cache=True)
def all_finite(arr):
    """Whether every element of ``arr`` (any shape and layout) is finite."""
    for x in arr.flat:
        if not np.isfinite(x):
            return False
    return True


@njit(cache=True)
def write_step(slots, frames, action, reward, step, obs_store, action_store, reward_store, terminated_store,
               truncated_store, env_step_store):  # fmt: skip
    """Store one step in which no episode ended: row ``e`` of each input into slot ``slots[e]``.

    ``frames`` and ``obs_store`` are seen as ``(rows, frame_size)``, ``action``
    and ``action_store`` as ``(rows, action_size)``.
    """
    for e in range(slots.shape[0]):
        s = slots[e]
        for f in range(frames.shape[1]):
            obs_store[s, f] = frames[e, f]
        for a in range(action.shape[1]):
            action_store[s, a] = action[e, a]
        reward_store[s] = reward[e]
        terminated_store[s] = False
        truncated_store[s] = False
        env_step_store[s] = step
