"""possym's head detectors against TransformerLens 3.9's own ``detect_head``, on the same model and inputs.

The model is a possym GPT-J converted to a HookedTransformer (TransformerLens runs its own forward
pass there); possym reads the patterns three other ways: its own GPT-J's hook_pattern, the eager
attention weights of the Hugging Face export, and the HookedTransformer's hook_pattern through
``possym.head_scores``. Built from configs; nothing is downloaded."""

from __future__ import annotations

import warnings
from importlib.metadata import version

import pytest
import torch

transformer_lens = pytest.importorskip("transformer_lens")
pytestmark = pytest.mark.skipif(int(version("transformer-lens").split(".")[0]) >= 4,
                                reason="these compare with a HookedTransformer, which transformer-lens 4.x removed "
                                "(detect_head on a 4.x bridge: tests/integration/test_transformer_lens_both_ways.py)")

import possym  # noqa: E402
from possym.config import ModelConfig  # noqa: E402
from possym.heads.detectors import HEAD_NAMES, hooked_detector_scores  # noqa: E402
from possym.model.gptj import GPTJ  # noqa: E402
from possym.model.hf import hf_tokenizer, to_hf  # noqa: E402

WORDS = tuple(f"w{i}" for i in range(40))


@pytest.fixture(scope="module")
def model() -> GPTJ:
    # init_range 0.3: attention far from uniform, so the detectors tell heads apart
    cfg = ModelConfig(n_layers=2, d_model=32, n_heads=4, d_mlp=64, d_vocab=len(WORDS), dropout=0.0, init_range=0.3)
    return GPTJ(cfg, torch.Generator().manual_seed(0)).eval()


@pytest.fixture(scope="module")
def tokens() -> torch.Tensor:
    """Random tokens repeated once (so duplicate and induction targets exist), [batch, pos]."""
    first = torch.randint(0, len(WORDS), (4, 7), generator=torch.Generator().manual_seed(1))
    return torch.cat((first, first), 1)


def detect_head(ht, tokens: torch.Tensor, name: str, **options: bool) -> torch.Tensor:
    """TransformerLens's scores [layer, head], from the inputs as the strings its tokenizer reads back."""
    from transformer_lens.head_detector import detect_head as tl_detect_head

    texts = [" ".join(WORDS[t] for t in row) for row in tokens.tolist()]
    assert torch.equal(ht.to_tokens(texts), tokens)  # no BOS is prepended: both see the same tokens
    return tl_detect_head(ht, texts, name, **options)


@pytest.fixture(scope="module")
def hooked(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return possym.to_hooked_transformer(model, tokenizer=hf_tokenizer(WORDS, WORDS[0]))


@pytest.mark.parametrize("options", [{}, {"exclude_bos": True}, {"exclude_current_token": True}],
                         ids=["default", "exclude-bos", "exclude-current"])
def test_possyms_detectors_equal_transformer_lens_detect_head_on_every_head(model, hooked, tokens, options):
    ours = hooked_detector_scores(model, tokens, **options).mean(0)  # [layer, head, detector]
    for d, name in enumerate(HEAD_NAMES):
        theirs = detect_head(hooked, tokens, name, **options)
        torch.testing.assert_close(ours[..., d], theirs.double(), rtol=0, atol=1e-6)
    assert ours.std() > 0.01  # the heads differ: equality is not between two constants


def test_head_scores_of_the_hugging_face_export_and_the_hooked_transformer_carry_the_same_detectors(
    model, hooked, tokens
):
    theirs = torch.stack([detect_head(hooked, tokens, name) for name in HEAD_NAMES], -1).double()
    for other in (to_hf(model).eval(), hooked):
        scores = possym.head_scores(other, tokens)
        assert scores.detectors.shape == (4, 2, 4, 3)
        torch.testing.assert_close(scores.detectors.mean(0), theirs, rtol=0, atol=1e-6)
        records = scores.records(n_kv_heads=4)
        assert [r[HEAD_NAMES[2]] for r in records] == pytest.approx(theirs[..., 2].flatten().tolist(), abs=1e-6)
