"""A trained checkpoint as a plain Hugging Face folder (``GPTJForCausalLM`` and its tokenizer).

Example:
    >>> export_run(RunDir.open("runs/demo/number"), Path("hf_number"), step="best")   # doctest: +SKIP
    4800
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from possym.errors import PossymError
from possym.runs import RunDir, StepSpec


def export_run(run: RunDir, out: Path, step: StepSpec = "final") -> int:
    """Write the model at ``step`` into the new folder ``out``; returns the step exported."""
    from possym.model.hf import hf_tokenizer, to_hf
    from possym.tasks import PAD, task_vocab

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise PossymError(f"export folder {out} exists and is not empty")
    at = run.resolve_step(step)
    model = run.load_model(at)
    vocab = task_vocab(run.config.task)
    # Write into a sibling temp folder and rename it into place, so a crash never leaves half a model. An OS error
    # names the folder asked for, never the temporary one (which is gone when the error is read).
    tmp: Path | None = None
    try:
        tmp = Path(tempfile.mkdtemp(dir=out.parent if out.parent.exists() else None, prefix=f".{out.name}."))
        to_hf(model).save_pretrained(tmp)
        hf_tokenizer(vocab.tokens, PAD).save_pretrained(tmp)
        if out.exists():
            out.rmdir()
        shutil.move(str(tmp), out)
    except OSError as exc:
        name = None if exc.filename is None else str(exc.filename)
        ours = name is None or Path(name).name.startswith(f".{out.name}.") or (tmp is not None and
                                                                               name.startswith(str(tmp)))
        if exc.errno is None or not ours:
            raise
        raise OSError(exc.errno, exc.strerror, str(out)) from exc
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return at
