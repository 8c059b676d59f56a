"""The model inside a wrapper that :func:`possym.head_scores` sees through: nnsight's.

nnsight's ``NNsight``, ``LanguageModel`` and ``TransformersModel`` are *envoys*: each holds the
``torch.nn.Module`` it wraps as ``_module`` (nnsight's documented attribute) and runs it unchanged
outside a ``trace``. Scoring that module is scoring the model the user traces. A wrapper built from a
repo id holds a weightless skeleton on the ``meta`` device until its first trace or ``dispatch()``;
that is refused with the call that loads it, since possym never loads weights behind a caller's back.

Example:
    >>> import torch
    >>> net = torch.nn.Linear(2, 2)
    >>> unwrap(net) is net                                       # not a wrapper: as it is
    True
    >>> from nnsight import NNsight                              # doctest: +SKIP
    >>> unwrap(NNsight(net)) is net                              # doctest: +SKIP
    True
"""

from __future__ import annotations

from typing import Any

from possym.errors import PossymError


def is_nnsight(model: Any) -> bool:
    """Whether ``model`` is an nnsight wrapper (checked by its class's module; nnsight is not imported)."""
    return type(model).__module__.split(".")[0] == "nnsight"


def unwrap(model: Any) -> Any:
    """The module an nnsight wrapper holds, with its weights loaded; any other model as it is."""
    if not is_nnsight(model):
        return model
    module = model._module
    if any(p.is_meta for p in module.parameters()):
        raise PossymError(
            f"this nnsight {type(model).__name__} holds a model whose weights are not loaded yet (nnsight loads "
            "them at the first trace); load them first with model.dispatch(), or build it with dispatch=True"
        )
    return module
