"""``possym regrade``: grade a reproduction's committed tables by today's rules, with its calibration and report."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("regrade", help="regrade committed reproduction tables: claims.csv, calibration.csv and, "
                                       "with --replication, the replication report")
    p.add_argument("tables", nargs="+", type=Path, metavar="TABLES",
                   help="directories of committed tables (docs/reproduce_paper, and seeds exported since)")
    p.add_argument("--out", type=Path, required=True, help="where claims.csv and calibration.csv go")
    p.add_argument("--replication", type=Path, metavar="FILE.md", help="write the replication report here too")
    p.add_argument("--provenance", default="", help="a sentence naming the commit, preset and seeds of the tables")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from possym.report.replication import tally, write

    claims = write(args.tables, args.out, replication=args.replication, provenance=args.provenance)
    print(f"{len(claims)} claims -> {args.out / 'claims.csv'}: "
          + ", ".join(f"{n} {v}" for v, n in tally(claims).items()))
    if args.replication is not None:
        print(f"replication report -> {args.replication}")
    return 0
