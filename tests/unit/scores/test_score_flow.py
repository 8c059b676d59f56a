"""Fig. 3 and 4B over many inputs (possym.scores.flow) against second computations: the hop attention read one input
at a time (possym.scores.patterns.hop_attention), and the plane's partial logits from the rotated q and k hooks."""

from __future__ import annotations

import numpy as np
import torch

from possym.config import ModelConfig
from possym.model.gptj import GPTJ
from possym.scores.flow import geometry_records, hop_flow_records
from possym.scores.patterns import hop_attention
from possym.scores.swaps import rope_planes, rotated_qk
from possym.tasks import generate, task_config, task_vocab


def _model_and_samples(n: int = 24):
    task = task_config("number")
    model = GPTJ(ModelConfig(n_layers=3, d_model=32, d_mlp=64, d_vocab=len(task_vocab(task))),
                 torch.Generator().manual_seed(1)).double().eval()
    return model, generate(task, n, np.random.default_rng(0))


def test_hop_flow_shares_equal_the_per_input_hop_attention():
    model, samples = _model_and_samples()
    rows = hop_flow_records(model, samples, task="number", seed=0, step=0, correct_only=False)
    most = np.flatnonzero(samples.n_hops == samples.n_hops.max())
    hops = int(samples.n_hops.max())
    for r in rows:
        hits = []
        for i in most:
            path = [int(p) for p in samples.path[i] if p >= 0]
            att = hop_attention(model, torch.as_tensor(samples.tokens[i]), path)[r.layer, 0]  # [hop, key_pos]
            h = hops - r.depth
            hits.append(int(att[h].argmax()) == path[h + 1])
        assert r.n_inputs == len(most) and abs(r.on_next - float(np.mean(hits))) < 1e-12


def test_the_planes_argmax_is_the_rotated_q_dot_rotated_k_maximum_of_that_plane():
    model, samples = _model_and_samples(24)  # 6 inputs with the most hops, whose head maxima differ
    rows = geometry_records(model, samples, task="number", seed=0, step=0, layer=1, correct_only=False)
    assert rows and all(0.0 <= r.key_alignment <= 1.0 + 1e-9 and 0.0 <= r.aim_error <= np.pi for r in rows)
    for r in rows:
        tokens = torch.as_tensor(samples.tokens[r.sample]).reshape(1, -1)
        q_rot, k_rot = (a[0, :, 0].double() for a in rotated_qk(model, tokens, [1])[1])
        q0, q1, _ = rope_planes(q_rot[-1], model.cfg.rot_dim)
        k0, k1, _ = rope_planes(k_rot, model.cfg.rot_dim)
        p = r.frequency_id - 1
        logit = q0[p] * k0[:, p] + q1[p] * k1[:, p]  # [key_pos]: the plane's partial logit, RoPE applied
        q = tokens.shape[1] - 1
        assert r.plane_argmax == q - int(logit.argmax())
        with torch.no_grad():  # the head's maximum from this input alone: the batched pass must not mix inputs
            _, cache = model.run_with_cache(tokens, ["blocks.1.attn.hook_pattern"])
        assert r.head_argmax == q - int(cache["blocks.1.attn.hook_pattern"][0, 0, q].argmax())
