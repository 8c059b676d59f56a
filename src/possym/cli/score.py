"""``possym score RUN [score.KEY=VALUE ...]``: positional/symbolic scores of every checkpoint, purity, frequency
use and figures.

A shell over :func:`possym.experiment.run_stage` with the score stage
(:func:`possym.stages.score.score_run` lists the files it writes into RUN), its settings
(:class:`~possym.stages.score.ScoreConfig`) as overrides, the syntax of a reproduction or a sweep:
``possym score RUN score.n_inputs=50 score.hops=true``. The run's memo, RUN/resume.json, which every
experiment holding the run shares, records the checkpoints scored with these settings: a rerun scores only
the checkpoints it lacks (none: the tables are read back), unless --redo.
``score.table_step=best|final|N`` picks the checkpoint of the final-scores tables (Table 1, frequency use,
the per-plane scores, Fig. 3 and 4B, and the table printed here); every checkpoint is still scored.
"""

from __future__ import annotations

import argparse
import contextlib
import time

from tqdm import tqdm

from possym.cli._args import add_allow_unfinished, add_overrides, add_redo, report_skip
from possym.devices import resolve_device
from possym.experiment import run_stage, stage_done
from possym.locks import being_written
from possym.records import GAMMA, GAMMAS, PurityRecord, ScoreRecord, Table1Record
from possym.runs import RunDir
from possym.stages.score import STAGE


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("score", help="positional/symbolic scores of a run's checkpoints, purity and frequency use",
                       description=__doc__)
    p.add_argument("run", help="a run directory made by `possym train`")
    add_allow_unfinished(p)
    add_redo(p, "score")
    add_overrides(p, "score", STAGE.defaults(), "score.n_inputs=50 score.hops=true score.steps=[0,500]",
                  STAGE.config)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = STAGE.from_overrides(args.overrides)
    resolve_device(STAGE.where(cfg)[1])  # a device this machine lacks stops the command before any work
    run_dir = RunDir.open(args.run, allow_unfinished=args.allow_unfinished)
    if being_written(run_dir.path):  # a writer at work (training): its refusal, naming it, says more than any other
        with run_dir.writing():
            pass
    cfg = STAGE.prepare(run_dir, cfg)  # every setting checked (a clamped n_inputs said once) before any write
    n_steps = len(cfg.steps) if cfg.steps is not None else len(run_dir.checkpoint_steps())
    # Locked here too (run_stage takes it again), so that a refusal comes before the progress bar: one line. A run
    # scored already with these settings is read back without the lock: a reader needs no write access.
    read_only = not args.redo and stage_done(run_dir, STAGE, cfg)
    with contextlib.nullcontext() if read_only else run_dir.writing():
        print(f"{run_dir.path}: {cfg.n_inputs} inputs, {n_steps} checkpoints")
        t0 = time.perf_counter()
        with tqdm(total=n_steps, desc="score", unit="ckpt", dynamic_ncols=True) as bar:
            done = run_stage(run_dir, STAGE, cfg, redo=args.redo, progress=lambda _s: bar.update(1))
    if done.ran:
        print(f"scored {len(done.steps)} checkpoints in {time.perf_counter() - t0:.1f}s "
              f"({len(done.kept)} already scored) -> {run_dir.artifact('scores')}")
    else:
        report_skip(done, run_dir)
    print_summary(run_dir, run_dir.resolve_step(cfg.table_step))
    if cfg.figures:
        print(f"figures -> {run_dir.artifact('figures')}/")
    return 0


def print_summary(run_dir: RunDir, step: int) -> None:
    """The scores of every head at ``step`` (the table step), read from the run's tables."""
    from possym.scores.dynamics import purity

    by = {(f.layer, f.head, f.gamma): f for f in run_dir.read("purity", PurityRecord) if f.query == "last"}
    ids = {(t.layer, t.head): t for t in run_dir.read("table1", Table1Record) if t.step == step}
    print(f"\ntable {run_dir.step_label(step)}; max-accuracy step {run_dir.best()} (the best checkpoint)")
    print(f"{'layer':>5} {'head':>4} {'s_pos':>6} {'s_sym':>6} {f'pure@{GAMMA}':>10} {f'first@{GAMMAS[0]}':>18} "
          f"{f'first@{GAMMAS[1]}':>18} {'mean ID':>7} {'dom ID':>6}")

    def fmt(f) -> str:  # first passage, and the first step pure as the final kind if that differs
        if f is None or f.step is None:
            return "never"
        text = f"{f.kind[:3]} {f.step}"
        if f.final_kind and f.final_kind != f.kind:
            text += f"/{f.final_kind[:3]} {f.final_kind_step}"
        return text

    for r in run_dir.read("scores", ScoreRecord):
        if r.step != step or r.query != "last":
            continue
        key = (r.layer, r.head)
        kind = purity(r.s_pos, r.s_sym, GAMMA) or "-"
        t = ids.get(key)
        mean_id, dom = (f"{t.weighted_id:.1f}", t.dominant_id) if t else ("", "")
        print(f"{r.layer:>5} {r.head:>4} {r.s_pos:6.3f} {r.s_sym:6.3f} {kind:>10} "
              f"{fmt(by.get((*key, GAMMAS[0]))):>18} {fmt(by.get((*key, GAMMAS[1]))):>18} {mean_id:>7} {dom:>6}")
