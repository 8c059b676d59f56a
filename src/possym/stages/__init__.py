"""Stages: each capability of the pipeline as a registered function of (a context, a typed config).

A stage only loads, calls a library function and writes: :func:`possym.experiment.run_stage` runs it, the one way a
stage runs (``possym reproduce``, sweeps, ``possym score|lengthgen|discrepancy``, :class:`possym.Run` and a
notebook alike), with the run's lock held, its threads and device set and its settings recorded in the run's memo
(RUN/resume.json), so that nothing done is done again (:mod:`possym.stages.registry`, docs/architecture.md). The
library functions they call take any model and return records or frames (:mod:`possym.evaluate`,
:mod:`possym.scores`, :mod:`possym.theory`); :func:`possym.stages.training.train_runs` and ``train_group_runs`` train
run directories, :func:`possym.stages.heads.heads_run` and :func:`possym.stages.llm.llm_experiment` run the
pretrained-model experiments, :func:`possym.stages.data.task_instances` draws instances.

Each stage writes its artifacts into the run directory (names from :data:`possym.runs.ARTIFACTS`); none parses
arguments or prints.
"""
