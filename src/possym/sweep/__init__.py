"""Sweeps: an experiment with variants, its runs handed to a local pool, Ray or Slurm, then one summary.

A sweep spec is an experiment file (:mod:`possym.experiment.spec`; the packaged ones are
``possym/configs/sweeps/*.yaml``), and each run's stretch of stages is one unit of work on an
engine (:func:`possym.experiment.run_experiment`).

- :mod:`possym.sweep.engines`: the local process pool, Ray and submitit adapters;
- :mod:`possym.sweep.run`: the sweep (the executor on an engine) and its summary;
- :mod:`possym.sweep.aggregate`: mean ± sd across seeds, and the per-seed facts;
- :mod:`possym.sweep.claims`: the claims table seed by seed;
- :mod:`possym.sweep.plots`: figures with ±sd bands (records in, Figure out).
"""
