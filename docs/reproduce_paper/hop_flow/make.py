"""Fig. 3's flow along the hops and Fig. 4B's geometry over many inputs, from trained checkpoints.

Reads each run's best checkpoint (read-only; an unfinished run's best from its metrics log), draws 2,000 inputs
of its task with numpy.random.default_rng(0), and keeps those with the most hops that the model answers right
(possym.scores.flow). Writes, beside this file:

- hop_flow.csv: possym.records.HopFlowRecord, every run;
- plane_geometry.csv: possym.records.PlaneGeometryRecord, layer 1 of the number runs;
- number_s{seed}_fig4b_geometry.png: Fig. 4B for the first of those inputs (possym.report.score_plots).

    PYTHONPATH=src OMP_NUM_THREADS=1 python docs/reproduce_paper/hop_flow/make.py RUN_DIR...
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from possym.records import records_csv
from possym.report.score_plots import fig4b_geometry
from possym.runs import RunDir, atomic_write_text, save_figure
from possym.scores.flow import geometry_records, hop_flow_records, solved_most_hops
from possym.scores.frequency import plane_geometry
from possym.tasks import generate

N_INPUTS = 2000


def main(paths: list[str]) -> None:
    torch.set_num_threads(1)
    flow, geometry = [], []
    out = Path(__file__).parent
    for path in paths:
        run = RunDir.open(path, allow_unfinished=True)
        step = run.resolve_step("best")
        model = run.load_model(step)
        task, seed = run.config.task.name, run.config.seeds.init
        samples = generate(run.config.task, N_INPUTS, np.random.default_rng(0))
        flow += hop_flow_records(model, samples, task=task, seed=seed, step=step)
        if task == "number":
            geometry += geometry_records(model, samples, task=task, seed=seed, step=step, layer=1)
            first = int(solved_most_hops(model, samples)[0])
            geo = plane_geometry(model, torch.as_tensor(samples.tokens[first]), layer=1)
            title = f"number s{seed}, step {step}, L1, input {first}, frequency ID {geo.frequency_id}"
            save_figure(fig4b_geometry(geo, title=title), out / f"number_s{seed}_fig4b_geometry", formats=("png",))
        sys.stderr.write(f"{path}: {task} seed {seed} step {step}\n")
    atomic_write_text(out / "hop_flow.csv", records_csv(flow))
    atomic_write_text(out / "plane_geometry.csv", records_csv(geometry))


if __name__ == "__main__":
    main(sys.argv[1:])
