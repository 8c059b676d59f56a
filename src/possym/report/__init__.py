"""What possym says about the paper: the claims as data, graded over seeds, and the pages that show them.

- :mod:`possym.report.claimspec` reads ``possym/data/claims.yaml``, one entry per claim;
- :mod:`possym.report.evidence` reads runs and committed tables into one shape per seed;
- :mod:`possym.report.measures` turns the evidence into each claim's per-seed values;
- :mod:`possym.report.rules` defines the three rule kinds and the verdicts, :mod:`possym.report.power` simulates
  their size and power, :mod:`possym.report.grading` grades every claim, :mod:`possym.report.calibration` runs
  the controls on the paper's own data;
- :mod:`possym.report.replication` writes ``docs/replication.md``, :mod:`possym.report.page` a reproduction's
  ``report.html`` (docs/reproduce.md).
"""
