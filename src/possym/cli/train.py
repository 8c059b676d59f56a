"""``possym train --task TASK --out DIR [section.KEY=VALUE ...]``: train a model into a run directory, or several
seeds as one group; or resume either.

The overrides are those of a reproduction or a sweep: ``task.*``, ``model.*``, ``train.*``, ``seeds.*`` set
the run's config (defaults < ``--preset`` < overrides); ``train.monitor``, ``train.memory_budget_mb``,
``train.group`` and ``train.progress`` set the train stage (:class:`possym.stages.train.TrainStageConfig`),
as in an experiment.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from possym.api import train_models
from possym.config import RunConfig, load_config, preset_names
from possym.devices import resolve_device, torch_threads
from possym.errors import PossymError
from possym.experiment.config import SEED_FIELDS, train_overrides
from possym.runs import CONFIG, RunDir
from possym.settings import defaults_help
from possym.stages.train import STAGE, TrainStageConfig, train_run
from possym.tasks import TASKS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train GPT-J on a task, or several seeds as one group (or --resume either)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=list(TASKS))
    p.add_argument("--preset", help=f"a packaged preset ({', '.join(preset_names())})")
    p.add_argument("--out", help="new run directory (with --seeds: the parent of DIR/seed0, DIR/seed1, ...)")
    p.add_argument("--seeds", help="train these seeds as one group, e.g. 0,1,2: seed s sets seeds.data = "
                   "seeds.init = seeds.order = seeds.dropout = s; run s goes into OUT/seed{s}")
    p.add_argument("--resume", metavar="RUN", help="continue an interrupted run (or a --seeds parent) where it stopped")
    p.add_argument("overrides", nargs="*", metavar="section.KEY=VALUE",
                   help="e.g. train.lr=3e-4 model.n_layers=4 train.monitor=false; every key and its default is "
                   "listed below")
    defaults = RunConfig()
    p.epilog = "\n".join([
        "keys and their defaults (values are YAML: true, null, [0, 10]); the train stage's, as in an experiment:",
        defaults_help("train", STAGE.defaults()),
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


def group_members(parent: Path) -> list[Path]:
    """The run directories DIR/seed* of a ``--seeds`` parent, in seed order."""
    found = [p for p in parent.glob("seed*") if (p / CONFIG).is_file() and p.name[4:].isdigit()]
    return sorted(found, key=lambda p: int(p.name[4:]))


def open_or_create(args: argparse.Namespace, overrides: list[str]) -> RunDir:
    if not args.task or not args.out:
        raise PossymError("give --task and --out for a new run, or --resume RUN")
    cfg = load_config(args.task, args.preset, overrides)
    resolve_device(cfg.train.device)  # a device this machine lacks is refused before the run directory is made
    with torch_threads(cfg.train.threads):  # while the run records its environment, so meta.json tells the truth
        return RunDir.create(args.out, cfg, argv=sys.argv)


def format_eval(run: RunDir) -> str:
    """The run's final test accuracies, per hop count and over all: ``hop1=0.990 ... all=0.950``."""
    final = run.metrics_log().final
    if final is None:
        return "unfinished (no final test record)"
    return " ".join(f"hop{h}={a:.3f}" for h, a in sorted(final.hops.items())) + f" all={final.accuracy:.3f}"


def _group(configs: list[RunConfig], outs: list[Path], stage: TrainStageConfig) -> int:
    runs = train_models(configs, list(outs), monitor=stage.monitor, progress=stage.progress,
                        memory_budget_mb=stage.memory_budget_mb, group=stage.group)
    for r in runs:
        print(f"test accuracy ({r.config.task.name}, {r.path.name}): {format_eval(r.dir)}")
    return 0


def run(args: argparse.Namespace) -> int:
    overrides, stage = train_overrides(args.overrides)
    if args.resume:
        if args.task or args.preset or args.out or overrides or args.seeds:
            raise PossymError("--resume takes only the run directory (and train stage keys such as train.monitor); "
                              "its config is fixed in RUN/config.yaml")
        parent = Path(args.resume)
        if not (parent / CONFIG).is_file() and parent.is_dir() and group_members(parent):
            members = group_members(parent)
            print(f"resuming {len(members)} runs in {parent}")
            return _group([RunDir.open(p).config for p in members], members, stage)
        run_dir = RunDir.open(args.resume)
    elif args.seeds is not None:
        if not args.task or not args.out:
            raise PossymError("give --task and --out (the parent directory) with --seeds")
        if any(o.startswith("seeds.") for o in overrides):
            raise PossymError("--seeds sets every seed (seeds.data, init, order, dropout); drop the seeds.* overrides")
        seeds = parse_seeds(args.seeds)
        configs = [load_config(args.task, args.preset, [*overrides, *(f"seeds.{f}={s}" for f in SEED_FIELDS)])
                   for s in seeds]
        resolve_device(configs[0].train.device)
        print(f"training seeds {seeds} into {args.out}/seed*")
        return _group(configs, [Path(args.out) / f"seed{s}" for s in seeds], stage)
    else:
        run_dir = open_or_create(args, overrides)
    print(f"run directory: {run_dir.path}")
    train_run(run_dir, monitor=stage.monitor, progress=stage.progress)
    print(f"test accuracy ({run_dir.config.task.name}): {format_eval(run_dir)}")
    return 0
