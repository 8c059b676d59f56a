"""Sec. 3.2's "no information flow" at the last token (Fig. 3A), measured (not graded: the rule tally does not
read it). The paper: from the last token, L1 and L2 attend the key its number points at but copy nothing; L3
copies the answer once it has flowed there. Here, at the last-token query only, the key its hop points at
(path[1]) is knocked out (possym.evaluate.interventions.KnockOut) in one layer or a set of layers; controls: the
layer's own attention maximum, and a random other key. Accuracy on the correctly solved 4-hop inputs of 2,000
drawn with numpy.random.default_rng(0) (1.00 as trained, by selection). Writes last_token_knockout.csv:

    PYTHONPATH=src OMP_NUM_THREADS=1 python docs/reproduce_paper/hop_flow/last_token_knockout.py \
        docs/reproduce_paper/hop_flow/last_token_knockout.csv RUN_DIR...
"""
import sys

import numpy as np
import pandas as pd
import torch

from possym.evaluate.interventions import KnockOut, model_logits
from possym.runs import RunDir
from possym.scores.flow import solved_most_hops
from possym.tasks import generate

torch.set_num_threads(1)
rows = []
for path in sys.argv[2:]:
    run = RunDir.open(path, allow_unfinished=True)
    step = run.resolve_step("best")
    model = run.load_model(step).eval()
    samples = generate(run.config.task, 2000, np.random.default_rng(0))
    idx = solved_most_hops(model, samples)
    tokens, answer = torch.as_tensor(samples.tokens[idx]), torch.as_tensor(samples.answer[idx])
    paths = samples.path[idx]
    last = tokens.shape[1] - 1
    assert (paths[:, 0] == last).all(), "the hop path starts at the last token"
    n, L = len(idx), model.cfg.n_layers
    names = [f"blocks.{l}.attn.hook_pattern" for l in range(L)]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names)
    rng = np.random.default_rng(1)
    target = torch.as_tensor(paths[:, 1])
    sets = [(l,) for l in range(L)] + [(1, 2), (2, 3, 4), tuple(range(3, L)), tuple(range(1, L))]
    for layers in sets:
        layer = layers[0]  # the attention maximum and the attention on the target are read at the set's first layer
        att = cache[names[layer]][:, 0, last]  # [input, key]
        argmax = att.argmax(-1)
        other = torch.as_tensor([rng.choice([k for k in range(last) if k != t]) for t in paths[:, 1]])
        for what, keys in (("hop_target", target), ("attention_max", argmax), ("random_other", other)):
            mask = torch.zeros(n, tokens.shape[1], dtype=torch.bool)
            mask[torch.arange(n), keys] = True
            with torch.no_grad():
                logits = model_logits(model, tokens, [KnockOut(layers, mask, queries=(last,))])[:, -1]
            acc = float((logits.argmax(-1) == answer).double().mean())
            rows.append(dict(task=run.config.task.name, seed=run.config.seeds.init, step=step,
                             layers=",".join(map(str, layers)), knocked=what, n=n, accuracy=round(acc, 4),
                             attention_on_target=round(float(att[torch.arange(n), target].mean()), 4)))
    sys.stderr.write(f"{path}: {n} inputs\n")
pd.DataFrame(rows).to_csv(sys.argv[1], index=False)
