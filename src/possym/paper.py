"""The paper's own numbers, as a package data file, for drawing them beside ours.

``data/paper_numbers.json`` holds values digitised from the figures of Urrutia et al. (arXiv
2605.31558, CC BY 4.0) and transcribed from its tables; its ``source`` field says how. Keys include
``fig5a_discrepancy_bounds``, ``fig5b_length_generalisation``, ``fig2a_number_task_test_accuracy_by_hop``,
``fig6_final_scores_last_token_step_6000``, ``table1_weighted_frequency_id`` and
``table3_llm_one_hop_accuracy``.

Example:
    >>> paper_numbers()["fig5a_discrepancy_bounds"]["n"][:3]
    [1, 11, 21]
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from typing import Any


@functools.cache
def paper_numbers() -> dict[str, Any]:
    return json.loads(importlib.resources.files("possym").joinpath("data/paper_numbers.json").read_text("utf-8"))
