"""The device setting (``score.device``, ``lengthgen.device``, ``discrepancy.device``) reaches every command
that runs a model, and a device this machine lacks stops it before any work (exit 2). Here the device is the
CPU; tests/unit/test_devices.py checks on the meta device that the paths keep their tensors on whatever device
they are given."""


import pytest
import torch

from possym.cli import main
from possym.config import load_config
from possym.runs import RunDir
from possym.stages.memo import run_memo
from possym.tasks import make_splits
from possym.train.loop import train


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tiny_session_overrides) -> str:
    cfg = load_config("number", None, [*tiny_session_overrides, "train.device=cpu"])
    run = RunDir.create(tmp_path_factory.mktemp("dev") / "run", cfg, argv=["t"])
    train(run, make_splits(cfg.task, 0))
    return str(run.path)


def test_every_model_command_takes_a_device_and_the_run_records_the_one_it_used(run_dir, capsys):
    assert main(["score", run_dir, "score.device=cpu", "score.n_inputs=4", "score.figures=false",
                 "score.frequency=false"]) == 0  # fmt: skip
    assert main(["lengthgen", run_dir, "lengthgen.device=cpu", "lengthgen.grid=[0,5]", "lengthgen.n=4",
                 "lengthgen.n_prefixes=2", "--no-figures"]) == 0  # fmt: skip
    assert main(["discrepancy", run_dir, "discrepancy.device=cpu", "discrepancy.extras=[0,5]",
                 "discrepancy.samples=4"]) == 0  # fmt: skip
    run = RunDir.open(run_dir)
    assert run.metrics()[-1]["event"] == "final" and run.metrics()[-1]["device"] == "cpu"
    memo = run_memo(run.path)
    assert {memo.entry(stage)["execution"]["device"] for stage in ("score", "lengthgen", "discrepancy")} == {"cpu"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: asking for it is not an error here")
@pytest.mark.parametrize(
    "command",
    [
        ["score", "score.n_inputs=4", "score.figures=false"],
        ["lengthgen", "lengthgen.grid=[0,5]", "lengthgen.n=4", "lengthgen.n_prefixes=2", "--no-figures", "--redo"],
        ["discrepancy", "discrepancy.extras=[0,5]", "discrepancy.samples=4"],
    ],
)
def test_a_device_this_machine_lacks_stops_the_command_before_any_work(run_dir, command, capsys):
    name, *options = command
    assert main([name, run_dir, *options, f"{name}.device=cuda"]) == 2
    err = capsys.readouterr().err
    assert f"possym {name}: error: device='cuda', but this torch sees no CUDA device" in err
    assert "%|" not in err  # no progress bar was started
