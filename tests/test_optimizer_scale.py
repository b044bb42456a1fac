"""``scripts/optimizer_scale.py``: the running gradient scale read back from a real run's checkpoint."""

from __future__ import annotations

import pytest
import torch
from theory_scripts import load_script

from prioritylab.cli import main as cli_main


def test_the_scale_is_the_optimisers_own_denominator():
    script = load_script("optimizer_scale")
    p = torch.nn.Parameter(torch.zeros(3))
    grads = [torch.tensor([1.0, -2.0, 4.0]), torch.tensor([3.0, 2.0, 0.0])]
    for centered in (True, False):
        opt = torch.optim.RMSprop([p], lr=0.0, alpha=0.5, centered=centered)
        for g in grads:
            p.grad = g.clone()
            opt.step()
        s = opt.state[p]
        expected = (s["square_avg"] - (s["grad_avg"] ** 2 if centered else 0)).sqrt().median().item()
        assert script.gradient_scales(opt.state_dict()) == pytest.approx([expected])
    adam = torch.optim.Adam([p], lr=0.0)
    p.grad = grads[0].clone()
    adam.step()
    expected = adam.state[p]["exp_avg_sq"].sqrt().median().item()
    assert script.gradient_scales(adam.state_dict()) == pytest.approx([expected])


def test_it_reads_a_dqn_run_on_minatar(tmp_path, capsys):
    assert cli_main(["train", "dqn", "--env", "MinAtar/Breakout-v1", "--steps", "400", "--start-steps", "100",
                     "--eval-every", "400", "--eval-episodes", "1", "--out", str(tmp_path), "--no-progress"]) == 0
    capsys.readouterr()
    assert load_script("optimizer_scale").main([str(tmp_path / "dqn_MinAtar-Breakout-v1_uniform_s0")]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("dqn_MinAtar-Breakout-v1_uniform_s0 step 400 opt (eps 0.01): ")
    assert len(line.split(": ")[1].split()) == 6  # conv weight and bias, hidden, output
