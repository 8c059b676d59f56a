"""Helpers of the misuse probes: a second process that trains or scores a run with a hook of its
own (pause at a step holding the lock, or kill itself), one that holds a directory's lock, the ``possym``
command in a process, and comparisons of two runs' records and weights."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from possym.runs import RunDir

# Fields that hold wall-clock times, and the live monitor's scores (an observation of the model, on by default
# in `possym train` and off in the in-process reference): the only ones two equal runs may differ in.
NOT_COMPARED = {"time", "eval_s", "monitor_s", "scores"}

# What the second process does at its hook: kill itself, or pause there holding the lock until the test says go.
PAUSE_OR_KILL = textwrap.dedent("""
    def pause_or_kill(mode, flag):
        if mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        flag.with_suffix(".ready").touch()
        deadline = time.time() + 120
        while not flag.exists() and time.time() < deadline:
            time.sleep(0.05)
""")

# A second process's training, with `hook(info)` called after each step.
TRAINER = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    import torch
    torch.set_num_threads(1)
    from possym.runs import RunDir
    from possym.tasks import make_splits
    from possym.train.loop import train
    run = RunDir.open(sys.argv[1])
    mode, at, flag = sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])

    def hook(info):
        if info["step"] == at:
            pause_or_kill(mode, flag)

    train(run, make_splits(run.config.task, run.config.seeds.data), on_step=hook)
""")


# A second process's scoring (a small ScoreConfig; forced, so that it scores, and calls `hook(step)`, after
# each checkpoint even where the run is scored already).
SCORER = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    import torch
    torch.set_num_threads(1)
    from possym.experiment import run_stage
    from possym.runs import RunDir
    from possym.stages.score import ScoreConfig
    run = RunDir.open(sys.argv[1])
    mode, flag = sys.argv[2], Path(sys.argv[3])

    def hook(step):
        pause_or_kill(mode, flag)

    run_stage(run, "score", ScoreConfig(n_inputs=4, figures=False, frequency=False), redo=True, progress=hook)
""")

# A process that holds a directory's writer lock until its stdin closes.
HOLD = ("import sys; from possym.locks import writer_lock\n"
        "with writer_lock(sys.argv[1]):\n    print('held', flush=True); sys.stdin.read()")


def env() -> dict[str, str]:
    """The test's own import path, so a subprocess runs this checkout's possym."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def start_trainer(run: Path, mode: str, at: int, flag: Path) -> subprocess.Popen:
    script = PAUSE_OR_KILL + TRAINER
    return subprocess.Popen([sys.executable, "-c", script, str(run), mode, str(at), str(flag)], env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def start_scorer(run: Path, mode: str, flag: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", PAUSE_OR_KILL + SCORER, str(run), mode, str(flag)], env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def hold_lock(directory: Path) -> subprocess.Popen:
    """Another process holding ``directory``'s lock until its stdin closes."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], env=env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def wait_for(path: Path, proc: subprocess.Popen, seconds: float = 300.0) -> None:
    """Until ``path`` exists; fails, with the process's stderr, if ``proc`` ends first."""
    deadline = time.time() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.time() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def possym_cli(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``possym ARGV`` in a process of its own."""
    return subprocess.run([sys.executable, "-m", "possym", *argv], env=env(), capture_output=True, text=True,
                          timeout=timeout)


def comparable(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in NOT_COMPARED} for r in records]


def weights(run: RunDir, step: int) -> dict[str, torch.Tensor]:
    return load_file(run.checkpoint_path(step))


def same_weights(a: RunDir, b: RunDir, step: int) -> bool:
    wa, wb = weights(a, step), weights(b, step)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)




def copy_run(run: RunDir, dest: Path) -> RunDir:
    """A copy of ``run`` at ``dest`` (a finished run shared by a module's tests, copied before a test damages it)."""
    import shutil

    shutil.copytree(run.path, dest)
    return RunDir.open(dest)


def one_line_error(capsys, argv: list[str], code: int = 2) -> str:
    """``possym ARGV`` in this process: it exits with ``code`` and says one line on stderr, no traceback."""
    from possym.cli import main

    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def tree(root: Path) -> dict[str, int]:
    """Every file and folder under ``root`` with its size (folders -1): what a refused call must leave as it was."""
    return {str(p.relative_to(root)): (p.stat().st_size if p.is_file() else -1) for p in sorted(Path(root).rglob("*"))}
