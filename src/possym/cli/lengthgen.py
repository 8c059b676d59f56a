"""``possym lengthgen RUN [lengthgen.KEY=VALUE ...]``: accuracy with K extra tokens before the target window
(paper Fig. 5B).

A shell over :func:`possym.experiment.run_stage` with the lengthgen stage
(:class:`possym.stages.lengthgen.LengthStageConfig`), its settings as overrides, the syntax of a
reproduction or a sweep: ``possym lengthgen RUN lengthgen.n=200 lengthgen.steps=[best,final]``. The curves
go into RUN/lengthgen.csv; the run's memo, RUN/resume.json, which every experiment holding the run shares,
records the checkpoints measured with these settings: a rerun measures only the checkpoints it lacks (none:
the curves are read back), unless --redo. Also draws figures/fig5b_length_generalisation.{png,svg} (the last
step's curve), ours beside the paper's digitised curve.
"""

from __future__ import annotations

import argparse
import contextlib

from tqdm import tqdm

from possym.cli._args import add_allow_unfinished, add_overrides, add_redo, report_skip
from possym.devices import resolve_device
from possym.evaluate.lengthgen import LengthGenConfig
from possym.experiment import run_stage, stage_done
from possym.locks import being_written
from possym.records import LengthRecord, points_at
from possym.runs import RunDir
from possym.stages.lengthgen import STAGE


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lengthgen", help="length generalisation: accuracy with K extra tokens (Fig. 5B)",
                       description=__doc__)
    p.add_argument("run", help="a run directory made by `possym train`")
    add_allow_unfinished(p)
    p.add_argument("--no-figures", action="store_true")
    add_redo(p, "lengthgen")
    add_overrides(p, "lengthgen", STAGE.defaults(), "lengthgen.n=200 lengthgen.grid=[0,100,1000] "
                  "lengthgen.steps=[best]", LengthGenConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = STAGE.from_overrides(args.overrides)
    resolve_device(STAGE.where(cfg)[1])  # a device this machine lacks stops the command before any work
    run_dir = RunDir.open(args.run, allow_unfinished=args.allow_unfinished)
    if being_written(run_dir.path):  # a writer at work (training): its refusal, naming it, says more than any other
        with run_dir.writing():
            pass
    cfg = STAGE.prepare(run_dir, cfg)  # every setting checked (K within memory) before anything is written
    figure = run_dir.artifact("figures") / "fig5b_length_generalisation"
    # The figure goes into RUN too, so the lock covers it; taken before the progress bar, a refusal is one line. A
    # curve measured already, with its figure drawn, is read back without the lock: a reader needs no write access.
    read_only = not args.redo and stage_done(run_dir, STAGE, cfg) and (args.no_figures or figure.with_suffix(".png")
                                                                      .is_file())
    with contextlib.nullcontext() if read_only else run_dir.writing():
        steps = [run_dir.resolve_step(s) for s in cfg.steps]
        total = cfg.curve.windows(run_dir.config.task) * len(steps)
        with tqdm(total=total, desc=f"lengthgen {run_dir.config.task.name}", unit="input", dynamic_ncols=True,
                  disable=read_only) as bar:
            done = run_stage(run_dir, STAGE, cfg, redo=args.redo, progress=bar.update)
        if not done.ran:
            report_skip(done, run_dir)
        points = run_dir.read("lengthgen", LengthRecord)
        if not args.no_figures and not read_only:
            from possym.paper import paper_numbers
            from possym.records import frame
            from possym.report.length_plots import plot_length_curves
            from possym.runs import save_figure

            curve = frame(points_at(points, steps[-1]), LengthRecord)
            fig = plot_length_curves({run_dir.config.task.name: curve}, paper_numbers()["fig5b_length_generalisation"])
            save_figure(fig, figure)
    for step in steps:
        print(run_dir.step_label(step))
        print(f"{'K':>6} {'accuracy':>9}  95% interval (per prefix)")
        for p in points_at(points, step):
            if p.n_hops == 0:
                print(f"{p.extra:>6} {p.accuracy:>9.3f}  [{p.cluster_low:.3f}, {p.cluster_high:.3f}]  n={p.n}")
    print(f"{'read' if read_only else 'wrote'} {run_dir.artifact('lengthgen')}")
    return 0
