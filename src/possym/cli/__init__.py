"""The ``possym`` command: the only place that parses arguments, prints, and exits.

Each subcommand lives in its own module of this package and exposes
``register(subparsers) -> None``, which adds its parser and sets ``func(args) -> int``.
Modules are imported lazily so that ``possym data`` does not pay for matplotlib or transformers, and
``possym --help`` imports none of them: it lists the commands from :data:`SUMMARIES` (which a test holds
equal to the help each module registers), so it answers without torch, scipy or pandas.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import signal
import sys
import threading
from pathlib import Path
from typing import Any

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
    "migrate": "possym.cli.migrate",
}


# Subcommand name -> its one-line help in `possym --help`; each module registers the same (tests/unit/cli).
SUMMARIES: dict[str, str] = {
    "data": "generate task instances as JSONL (tokens, answer, n_hops, path)",
    "train": "train GPT-J on a task, or several seeds as one group (or --resume either)",
    "export": "write a checkpoint as a transformers GPTJForCausalLM folder",
    "summary": "per-hop final test accuracy and the step each hop first passed a threshold",
    "llm": "the 1-hop LLM experiment (paper Sec. 3.7, App. H): accuracy against window length",
    "score": "positional/symbolic scores of a run's checkpoints, purity and frequency use",
    "theory": "verify the RoPE constructions, Remark 3.1 and Theorem 3.2's bounds",
    "discrepancy": "top-minus-second attention score of a trained run's heads vs length",
    "lengthgen": "length generalisation: accuracy with K extra tokens (Fig. 5B)",
    "reproduce": "the whole pipeline for both tasks, resumable, with a report",
    "sweep": "run a grid of trials (train, score, lengthgen, discrepancy) and summarise it",
    "heads": "positional/symbolic scores of every head of a local Hugging Face RoPE LM",
    "canonical": "Index / Retrieval / partial induction on frequency-controlled toy heads",
    "regrade": "regrade committed reproduction tables: claims.csv, calibration.csv and, with --replication, the "
               "replication report",
    "migrate": "bring a directory an earlier possym wrote into today's layout, once",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``possym`` parser with command ``only``'s full parser (its module imported), or, for no known command
    (``possym --help``, a misspelt one), every command by name and summary alone, importing no module."""
    parser = argparse.ArgumentParser(
        prog="possym", description="Positional versus symbolic attention heads in RoPE Transformers: the paper's "
        "tasks, GPT-J trained on them, the heads' scores over training, the RoPE theory, length generalisation and LLM "
        "heads, reproduced with its numbers beside ours. `possym COMMAND --help` lists a command's settings.")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error (it may come anywhere on the line)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    if only not in SUBCOMMANDS:
        for name, summary in SUMMARIES.items():
            sub.add_parser(name, help=summary, add_help=False)
        return parser
    seen: set[str] = set()
    for name, module in SUBCOMMANDS.items():
        if module in seen or name != only:
            continue
        importlib.import_module(module).register(sub)
        seen.add(module)
    return parser


# What to do about an OS error, by errno; {path} is the path the error names.
_OS_ADVICE: dict[int, str] = {
    errno.EEXIST: "{path} exists already; choose another path, or remove it",
    errno.ENOTDIR: "{path}: a part of it is a file, not a directory; choose another path",
    errno.EISDIR: "{path} is a directory; give a file",
    errno.ENOENT: "{path} does not exist; check the path",
    errno.EACCES: "no permission for {path}; choose a place you may write, or change its permissions",
    errno.EPERM: "no permission for {path}; choose a place you may write, or change its permissions",
    errno.EROFS: "{path} is on a read-only filesystem; choose another place",
    errno.ENOSPC: "the disk holding {path} is full; free some space, then {next}",
    errno.EDQUOT: "your disk quota is used up writing {path}; free some space, then {next}",
}


def os_error_message(exc: OSError, args: argparse.Namespace | None = None) -> str:
    """One sentence for an OS error: the path it concerns and what to do; for a full disk, the command that
    continues the one that was run (:func:`next_command`).

    >>> os_error_message(FileExistsError(errno.EEXIST, "File exists", "runs/x"))
    'runs/x exists already; choose another path, or remove it'
    >>> os_error_message(OSError(errno.ENOSPC, "No space left on device", "runs/x/state.pt"))
    'the disk holding runs/x/state.pt is full; free some space, then rerun the command'
    """
    path = exc.filename if exc.filename is not None else "a file"
    advice = _OS_ADVICE.get(exc.errno or -1)
    return advice.format(path=path, next=next_command(args)) if advice else f"{path}: {exc.strerror or exc}"


def next_command(args: argparse.Namespace | None) -> str:
    """What continues the command ``args`` after it stopped: ``possym train --resume RUN`` once a training's run
    directory exists (rerunning ``possym train --out RUN`` would be refused: RUN holds a run), the same command
    for those that continue where they stopped, else the command again."""
    from possym.runs import CONFIG

    if args is not None and args.command == "train":
        run = getattr(args, "resume", None) or getattr(args, "out", None)
        if run and not getattr(args, "seeds", None) and (Path(run) / CONFIG).is_file():
            return f"`possym train --resume {run}` continues it"
        if run and getattr(args, "seeds", None):
            return f"`possym train --resume {run}` continues it"
    if args is not None and args.command in ("reproduce", "sweep", "canonical"):
        return "rerun the same command to continue where it stopped"
    return "rerun the command"


def resume_hint(args: argparse.Namespace) -> str:
    """How to continue an interrupted command (:func:`next_command`, where it continues)."""
    if args.command in ("train", "reproduce", "sweep", "canonical"):
        hint = next_command(args)
        return "" if hint == "rerun the command" else f"; {hint}"
    return ""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so that the command unwinds as Ctrl-C makes it (its locks released,
    its temporary files removed) and ends with one line, the resume hint and exit code 143 (128 + 15)."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated()


def parse(argv: list[str]) -> argparse.Namespace:
    """The arguments, with ``section.key=value`` overrides accepted anywhere on the line (after ``--out DIR``
    too, where argparse would stop collecting a positional list)."""
    only = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only if only in SUBCOMMANDS else None)
    args, extra = parser.parse_known_args(argv)
    if extra:
        if hasattr(args, "overrides") and all("=" in a and not a.startswith("-") for a in extra):
            args.overrides = [*(args.overrides or []), *extra]
        else:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    args = parse([a for a in argv if a != "--debug"])
    name = f"possym {args.command}"
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:
        if debug:
            raise
        if isinstance(exc, Terminated):
            print(f"\n{name}: terminated (SIGTERM){resume_hint(args)}", file=sys.stderr)
            return 143
        print(f"\n{name}: interrupted{resume_hint(args)}", file=sys.stderr)
        return 130
    except PossymError as exc:
        # The library's own refusals say what is wrong and what is allowed; any other exception is a bug.
        if debug:
            raise
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the user's filesystem: a path that is a file, no permission, a full disk
        if debug or (exc.filename is None and exc.errno not in (errno.ENOSPC, errno.EDQUOT)):
            raise  # not about a path (a lost connection, a bug): the traceback tells more than a sentence
        print(f"{name}: error: {os_error_message(exc, args)} (--debug shows the traceback)", file=sys.stderr)
        return 2
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
