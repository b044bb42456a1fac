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
    adam.step()  # after one step Adam's bias-corrected second moment is the gradient's square
    assert script.gradient_scales(adam.state_dict()) == pytest.approx([2.0])  # median |g| of (1, 2, 4)
    p.grad = grads[1].clone()
    adam.step()
    s, beta2 = adam.state[p], 0.999
    expected = (s["exp_avg_sq"] / (1 - beta2**2)).sqrt().median().item()
    assert script.gradient_scales(adam.state_dict()) == pytest.approx([expected])


def test_it_reads_a_dqn_run_on_minatar(tmp_path, capsys):
    assert cli_main(["train", "dqn", "--env", "MinAtar/Breakout-v1", "--steps", "400", "--start-steps", "100",
                     "--eval-every", "400", "--eval-episodes", "1", "--out", str(tmp_path), "--no-progress"]) == 0
    capsys.readouterr()
    assert load_script("optimizer_scale").main([str(tmp_path / "dqn_MinAtar-Breakout-v1_uniform_s0")]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("dqn_MinAtar-Breakout-v1_uniform_s0 step 400 opt (eps 0.01): ")
    assert len(line.split(": ")[1].split()) == 6  # conv weight and bias, hidden, output


def test_a_damaged_or_foreign_checkpoint_is_a_one_line_error(tmp_path, capsys):
    """Read as a resume reads it: a changed byte fails its SHA-256, and another run's checkpoint its identity."""
    import shutil

    args = ["--env", "MinAtar/Breakout-v1", "--steps", "400", "--start-steps", "100", "--eval-every", "400",
            "--eval-episodes", "1", "--out", str(tmp_path), "--no-progress"]  # fmt: skip
    for sampler in ("uniform", "per"):
        assert cli_main(["train", "dqn", *args, "--sampler", sampler]) == 0
    capsys.readouterr()
    script = load_script("optimizer_scale")
    uniform, per = tmp_path / "dqn_MinAtar-Breakout-v1_uniform_s0", tmp_path / "dqn_MinAtar-Breakout-v1_per_s0"
    for f in ("checkpoint.pt", "checkpoint.pt.sha256"):
        shutil.copy(per / f, uniform / f)
    assert script.main([str(uniform)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "was written by {'agent': 'dqn', 'env': 'MinAtar/Breakout-v1', 'sampler': 'per'" in err[0]
    data = bytearray((per / "checkpoint.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (per / "checkpoint.pt").write_bytes(bytes(data))
    assert script.main([str(per)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is corrupt: its SHA-256" in err[0], err
    (per / "checkpoint.pt").unlink()  # its digest left behind: the checkpoint is named, not the manifest
    assert script.main([str(per)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"optimizer_scale: error: {per / 'checkpoint.pt'}: "), err
