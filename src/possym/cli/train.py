"""``possym train --task TASK --out RUN [section.KEY=VALUE ...]``: train a model into a run directory; with
``--seeds 0,1,2``, train several seeds as one experiment into ``OUT/runs/TASK-sS``; or resume either.

The overrides are those of a reproduction or a sweep: ``task.*``, ``model.*``, ``train.*``, ``seeds.*`` set
the run's config (defaults < ``--preset`` < overrides); ``training.monitor``, ``training.memory_budget_mb``,
``training.group`` and ``training.progress`` set the training stage (:class:`possym.stages.training.TrainStageConfig`),
as in an experiment.

One run trains through :func:`possym.experiment.run_stage`, its memo ``RUN/resume.json``. Several seeds are an
experiment (:func:`possym.experiment.seed_runs.seed_runs`) run by the executor, in its layout: a reproduction
or a sweep with the same settings over the same OUT finds them trained, and the seeds that can share a step
train as one group. ``--resume`` continues a run directory, or the training of an experiment directory (an
OUT of ``--seeds``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from possym.config import RunConfig, load_config, preset_names
from possym.devices import resolve_device, torch_threads
from possym.errors import PossymError
from possym.experiment import run_experiment, run_stage
from possym.experiment.seed_runs import resume_run, seed_runs, stored_seed_runs
from possym.experiment.spec import Experiment, train_overrides
from possym.runs import CONFIG, RunDir
from possym.settings import defaults_help
from possym.stages.training import CONTINUE, STAGE
from possym.tasks import TASKS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train GPT-J on a task, or several seeds as one group (or --resume either)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=list(TASKS))
    p.add_argument("--preset", help=f"a packaged preset ({', '.join(preset_names())})")
    p.add_argument("--out", help="new run directory (with --seeds: the experiment directory, runs in OUT/runs)")
    p.add_argument("--seeds", help="train these seeds as one experiment, e.g. 0,1,2: seed s sets seeds.data = "
                   "seeds.init = seeds.order = seeds.dropout = s; run s goes into OUT/runs/TASK-sS, where a "
                   "reproduction or a sweep over OUT finds it")
    p.add_argument("--resume", metavar="DIR", help="continue an interrupted run, or the runs of a --seeds OUT, "
                   "where they stopped; on a run, train.steps=N trains it on to N steps (recorded in its history), "
                   "and the execution keys (train.threads, train.device, ...) set how it runs")
    p.add_argument("--rebuild-metrics", metavar="RUN", help="write a run's missing, empty or damaged metrics.jsonl "
                   "back from its checkpoints (possym.train.rebuild)")
    p.add_argument("overrides", nargs="*", default=[], metavar="section.KEY=VALUE",
                   help="e.g. train.lr=3e-4 model.n_layers=4 training.monitor=false; every key and its default is "
                   "listed below")
    defaults = RunConfig()
    p.epilog = "\n".join([
        "keys and their defaults (values are YAML: true, null, [0, 10]); the training stage's, as in an experiment:",
        defaults_help("training", STAGE.defaults()),
        "the run's config (--preset changes some of them):",
        *(defaults_help(name, dataclasses.asdict(getattr(defaults, name))) for name in ("model", "train", "seeds")),
        f"  task.*: the task's own keys, e.g. for {defaults.task.name}: "
        + ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(defaults.task).items() if k != "name"),
    ])
    p.set_defaults(func=run)


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise PossymError(f"--seeds {text!r}: give whole numbers separated by commas, e.g. 0,1,2") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise PossymError(f"--seeds {text!r}: give distinct seeds >= 0, e.g. 0,1,2")
    return seeds


def open_or_create(args: argparse.Namespace, overrides: list[str]) -> RunDir:
    if not args.task or not args.out:
        raise PossymError("give --task and --out for a new run, or --resume RUN")
    cfg = load_config(args.task, args.preset, overrides)
    resolve_device(cfg.train.device)  # a device this machine lacks is refused before the run directory is made
    from possym.train.tracking import require_tracker

    require_tracker(cfg.train.log)  # and so is a tracker whose package is missing
    with torch_threads(cfg.train.threads):  # while the run records its environment, so meta.json tells the truth
        return RunDir.create(args.out, cfg, argv=sys.argv)


def format_eval(run: RunDir) -> str:
    """The run's final test accuracies, per hop count and over all: ``hop1=0.990 ... all=0.950``."""
    final = run.metrics_log().final
    if final is None:
        return "unfinished (no final test record)"
    return " ".join(f"hop{h}={a:.3f}" for h, a in sorted(final.hops.items())) + f" all={final.accuracy:.3f}"


def _experiment(exp: Experiment, out: Path) -> int:
    outcome = run_experiment(exp, out)
    for line in outcome.failure_lines():
        print(line)
    for spec in (s for s in exp.runs() if s.id not in outcome.failed):
        run = RunDir.open(out / "runs" / spec.id)
        done = "" if (spec.id, "training") in outcome.ran else " (trained already)"
        print(f"test accuracy ({spec.task}, {spec.id}){done}: {format_eval(run)}")
    return 1 if outcome.failed else 0


def run(args: argparse.Namespace) -> int:
    overrides, stage = train_overrides(args.overrides)
    if args.rebuild_metrics:
        if args.task or args.preset or args.out or args.resume or args.seeds or args.overrides:
            raise PossymError("--rebuild-metrics takes only the run directory")
        return _rebuild(RunDir.open(args.rebuild_metrics))
    if args.resume:
        if args.task or args.preset or args.out or args.seeds:
            raise PossymError("--resume takes only the run directory, or the OUT of --seeds, with train.steps=N, the "
                              "execution keys and the training stage's keys (training.monitor, ...); its config is "
                              "fixed in RUN/config.yaml")
        path = Path(args.resume)
        if path.is_dir() and not (path / CONFIG).is_file():
            exp = stored_seed_runs(path, args.overrides)
            print(f"resuming {len(exp.runs())} runs in {path}/runs")
            return _experiment(exp, path)
        before = RunDir.open(path)
        run_dir = resume_run(path, overrides, argv=sys.argv)
        if run_dir.config.total_steps != before.config.total_steps:
            print(f"training {path} on from {before.config.total_steps} to {run_dir.config.total_steps} steps "
                  f"(recorded in {path / 'meta.json'}'s history)")
    elif args.seeds is not None:
        if not args.task or not args.out:
            raise PossymError("give --task and --out (the experiment directory) with --seeds")
        exp = seed_runs(args.task, parse_seeds(args.seeds), args.preset, args.overrides)
        print(f"training seeds {list(exp.seeds)} into {args.out}/runs")
        return _experiment(exp, Path(args.out))
    else:
        run_dir = open_or_create(args, overrides)
    print(f"run directory: {run_dir.path}")
    # A resumed run trains whatever is left, whatever its memo says: that is what --resume asks.
    run_stage(run_dir, CONTINUE, stage, redo=bool(args.resume))
    nonfinite = "" if run_dir.nonfinite is None else f" ({run_dir.status()})"
    print(f"test accuracy ({run_dir.config.task.name}): {format_eval(run_dir)}{nonfinite}")
    return 0


def _rebuild(run_dir: RunDir) -> int:
    from possym.train.rebuild import rebuild_metrics

    done = rebuild_metrics(run_dir)
    kept = f"; the damaged log is kept as {done.kept}" if done.kept else ""
    missing = (f"; steps {list(done.missing)} had no checkpoint, so their evaluations are left out (retraining "
               f"gives them back: delete {run_dir.path / 'state.pt'}, then `possym train --resume {run_dir.path}`)"
               if done.missing else "")
    final = " and the final test" if done.final else ""
    print(f"rebuilt {len(done.steps)} evaluations{final} of {run_dir.path} from its checkpoints into "
          f"{run_dir.path / 'metrics.jsonl'}{missing}{kept}")
    return 0
