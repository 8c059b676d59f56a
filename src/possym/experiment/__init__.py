"""One experiment, one executor: a reproduction, a sweep and a canonical grid are three uses of one thing.

>>> exp = load_experiment("quick", seeds=(0, 1, 2), overrides=["score.n_inputs=100"])
>>> len(exp.runs()), exp.stage_names[:3]
(6, ('data', 'training', 'score'))

``run_experiment(exp, out="runs/quick")`` runs it, resumably: a rerun does only what is missing.
``run_stage(run, "score", cfg)`` runs one stage on one run through the same memo (``RUN/resume.json``);
``run_stage(out, "theory", cfg)`` an experiment-scope stage through the memo of ``out`` (``OUT/log/experiment.json``).
``possym train --seeds`` is an experiment too (:func:`possym.experiment.seed_runs.seed_runs`).
"""

from possym.experiment.executor import (
    ExperimentOutcome,
    StageRun,
    run_experiment,
    run_stage,
    run_unit,
    stage_done,
)
from possym.experiment.spec import (
    Experiment,
    RunSpec,
    Variant,
    apply_overrides,
    dump_experiment,
    experiment_from_dict,
    experiment_names,
    experiment_to_dict,
    load_experiment,
)

__all__ = [
    "Experiment",
    "ExperimentOutcome",
    "RunSpec",
    "StageRun",
    "Variant",
    "apply_overrides",
    "dump_experiment",
    "experiment_from_dict",
    "experiment_names",
    "experiment_to_dict",
    "load_experiment",
    "run_experiment",
    "run_stage",
    "run_unit",
    "stage_done",
]
