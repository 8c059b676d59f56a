"""Stages: each capability of the pipeline as one library function with a typed config.

A notebook can call these directly. ``possym reproduce``, sweeps, ``possym score|lengthgen|discrepancy``
and :class:`possym.Run` run a registered stage through :func:`possym.experiment.run_stage` instead, which
consults the run's memo (RUN/resume.json) so that nothing done is done again:

- :func:`possym.stages.data.task_instances` (instances to look at, or to write with `write_jsonl`);
- :func:`possym.stages.train.train_run` (a run directory to its last step) and
  :func:`possym.stages.train.train_runs` (many, in groups that share one batched step);
- :func:`possym.stages.score.score_run` with :class:`~possym.stages.score.ScoreConfig`;
- :func:`possym.stages.lengthgen.measure_curves` with :class:`~possym.stages.lengthgen.LengthStageConfig`;
- :func:`possym.stages.dilution.dilution_run` with :class:`~possym.stages.dilution.DilutionConfig`;
- :func:`possym.stages.length_protocol.protocol_curves` and ``protocol_table`` with
  :class:`~possym.stages.length_protocol.LengthProtocolConfig`;
- :func:`possym.stages.theory.theory_tables` with :class:`~possym.stages.theory.TheoryConfig`;
- :func:`possym.stages.theory.trained_discrepancy_run` with :class:`~possym.stages.theory.DiscrepancyConfig`;
- :func:`possym.stages.export.export_run`;
- :func:`possym.stages.heads.heads_run` with :class:`~possym.stages.heads.HeadsConfig` (a pretrained HF LM);
- :func:`possym.stages.llm.llm_experiment` (the paper's 1-hop LLM experiment against one provider);
- :func:`possym.stages.cliff.cliff_run` with :class:`~possym.stages.cliff.CliffConfig` (the number model's cliff);
- :func:`possym.stages.l0.l0_run` with :class:`~possym.stages.l0.L0Config` (scores split by hops and query,
  mixture test, sustained purity).

Each writes its artifacts into the run directory (names from :data:`possym.runs.ARTIFACTS`) and
returns typed records; none parses arguments or prints.
"""
