"""The ``possym`` command: the only place that parses arguments, prints, and exits.

Each subcommand lives in its own module of this package and exposes
``register(subparsers) -> None``, which adds its parser and sets ``func(args) -> int``.
Modules are imported lazily so that ``possym data`` does not pay for matplotlib or transformers.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from possym.errors import PossymError

# Subcommand name -> module in possym.cli; a plain dict keeps the registry explicit and stable.
SUBCOMMANDS: dict[str, str] = {
    "data": "possym.cli.data",
    "train": "possym.cli.train",
    "export": "possym.cli.export",
    "summary": "possym.cli.summary",
    "llm": "possym.cli.llm",
    "score": "possym.cli.score",
    "theory": "possym.cli.theory",
    "discrepancy": "possym.cli.theory",
    "lengthgen": "possym.cli.lengthgen",
    "reproduce": "possym.cli.reproduce",
    "sweep": "possym.cli.sweep",
    "heads": "possym.cli.heads",
    "canonical": "possym.cli.canonical",
    "regrade": "possym.cli.regrade",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="possym", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    seen: set[str] = set()
    for name, module in SUBCOMMANDS.items():
        if module in seen or (only is not None and name != only):
            continue
        importlib.import_module(module).register(sub)
        seen.add(module)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    only = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    args = build_parser(only).parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PossymError as exc:
        # The library's own refusals say what is wrong and what is allowed; any other exception is a bug.
        print(f"possym {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
