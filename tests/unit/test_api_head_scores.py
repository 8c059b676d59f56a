"""possym.head_scores dispatches on the model: our GPT-J through its engine, a Hugging Face model through
the heads engine. The same weights in both, every position a block, give the same scores."""

from __future__ import annotations

import dataclasses

import torch

import possym
from possym.heads.layout import BlockLayout, EncodedPrompt
from possym.model.gptj import GPTJ
from possym.model.hf import to_hf
from possym.tasks import task_vocab


def test_one_call_scores_a_possym_model_and_its_hugging_face_export_alike():
    cfg = possym.load_config("number", None, model__n_layers=2, model__d_model=32, model__d_mlp=64, model__n_heads=2)
    model = GPTJ(dataclasses.replace(cfg.model, d_vocab=len(task_vocab(cfg.task))), torch.Generator().manual_seed(0))
    model = model.double().eval()
    tokens = torch.randint(0, model.cfg.d_vocab, (3, 10), generator=torch.Generator().manual_seed(1))
    ours = possym.head_scores(model, tokens)
    layout = BlockLayout(start=0, block_size=1, n_blocks=tokens.shape[1] - 1)  # every key before the query
    hf = possym.head_scores(to_hf(model).double().eval(),
                            [EncodedPrompt(tuple(t.tolist()), layout, None, "random") for t in tokens])
    assert ours.s_pos.shape == hf.s_pos.shape == (3, 2, 2)
    torch.testing.assert_close(ours.s_pos, hf.s_pos, rtol=0, atol=1e-9)
    torch.testing.assert_close(ours.s_sym, hf.s_sym, rtol=0, atol=1e-9)
