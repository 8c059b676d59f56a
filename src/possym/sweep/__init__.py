"""Sweeps: a grid of trials over tasks, seeds and config variants, run on a local pool, Ray or Slurm.

- :mod:`possym.sweep.spec`: the YAML spec and its expansion into trials;
- :mod:`possym.sweep.trial`: one trial, run in-process through ``possym.cli.main``, resumable;
- :mod:`possym.sweep.engines`: the local process pool, Ray and submitit adapters;
- :mod:`possym.sweep.run`: skipping finished trials, bounded retries;
- :mod:`possym.sweep.aggregate`: mean ± sd across seeds, and the per-seed facts;
- :mod:`possym.sweep.plots`: figures with ±sd bands (records in, Figure out).
"""
