"""The wheel works without the source tree: build it, install it (no -e), run it from elsewhere.

An editable install hides what a wheel leaves out (``configs/`` outside the package went unnoticed
that way), so this test builds the wheel from a copy of the sources, installs it into a fresh venv
and runs the ``possym`` console script from a directory that is not the repository. The venv reuses
the test environment's torch and other dependencies through a ``.pth`` line, which keeps the test
offline and fast; that line adds a directory to ``sys.path`` without running the ``.pth`` files in
it, so the editable install of the test environment stays invisible and possym comes from the wheel.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src_copy"  # a copy, so the build's build/ and *.egg-info never touch the checkout
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)],
        check=True,
    )
    (wheel,) = dist.glob("possym-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)], check=True
    )
    return venv


def _possym(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [venv / "bin" / "possym", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(cwd)},
    )


def test_the_installed_wheel_is_what_runs_and_carries_its_presets_and_sweep_specs(wheel_venv, tmp_path):
    code = (
        "import possym, possym.config as c, possym.experiment.spec as s; "
        "print(possym.__file__); print(c.preset_names()); print(s.experiment_names())"
    )
    out = subprocess.run([wheel_venv / "bin" / "python", "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    where, presets, specs = out.stdout.splitlines()
    assert Path(where).is_relative_to(wheel_venv), f"possym imported from {where}, not from the wheel"
    assert "quick" in presets and "paper" in presets
    assert "robustness_quick" in specs  # the sweep specs ship too


@pytest.mark.long
def test_possym_data_and_a_five_step_quick_run_work_outside_the_repository(wheel_venv, tmp_path):
    data = _possym(wheel_venv, tmp_path, "data", "--task", "letter", "data.n=5", "--out", "letter.jsonl")
    assert data.returncode == 0, data.stderr
    assert len((tmp_path / "letter.jsonl").read_text().splitlines()) == 5
    # The quick preset as shipped; only its length and its data are cut so the test takes seconds.
    train = _possym(
        wheel_venv,
        tmp_path,
        "train",
        "--task",
        "number",
        "--preset",
        "quick",
        "--out",
        "run",
        "train.steps=5",
        "train.warmup_steps=2",
        "train.eval_every=5",
        "train.eval_size=64",
        "task.n_train=3840",
        "task.n_val=960",
        "task.n_test=960",
    )
    assert train.returncode == 0, train.stderr
    run = tmp_path / "run"
    assert "preset: quick" in (run / "config.yaml").read_text()
    assert (run / "checkpoints" / "step_000005.safetensors").is_file()
    final = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert final["event"] == "final" and final["step"] == 5
