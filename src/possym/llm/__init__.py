"""The paper's 1-hop LLM experiment (Section 3.7, Appendix H): prompts, providers, the answer store, the runner.

Data flows one way: ``prompts`` (samplers, Table 2 templates, the oracle) -> ``providers`` (replies)
-> ``run`` (the grid, retries, the ``store``) -> ``results`` (Table 3, screening) -> ``plots``.
Only ``possym.cli.llm`` prints or writes result files; only ``store`` writes the database.
"""
