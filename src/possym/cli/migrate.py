"""``possym migrate DIR``: a directory an earlier possym wrote (a reproduction, a sweep, the seeds of ``possym train
--seeds``, a canonical grid, a run) brought into today's layout, once; a shell over
:func:`possym.experiment.migrate.migrate`, whose docstring lists what each earlier layout was. Nothing else reads an
earlier layout: ``possym reproduce``, ``sweep``, ``train --resume`` and every command that opens a run refuse one in a
line that names it and this command."""

from __future__ import annotations

import argparse
from pathlib import Path

from possym.experiment.migrate import migrate


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("migrate", help="bring a directory an earlier possym wrote into today's layout, once",
                       description=__doc__)
    p.add_argument("dir", type=Path, metavar="DIR", help="an experiment directory (OUT) or a run directory")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    notes = migrate(args.dir)
    for note in notes:
        print(note)
    print(f"{args.dir}: {len(notes)} change(s); it is in today's layout" if notes else
          f"{args.dir} is in today's layout already: nothing to do")
    return 0
