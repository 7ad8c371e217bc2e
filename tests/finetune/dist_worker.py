"""torchrun worker: fine-tune a tiny random BERT on 2 ranks (gloo) and write each rank's
trainable parameters, so the test can check they stay identical across ranks."""

import json
import sys

import numpy as np
import torch

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from conftest import SNIPPETS  # noqa: E402

from contrastlab.distributed import cleanup, init_distributed  # noqa: E402
from contrastlab.finetune.data import label_matrix, label_names  # noqa: E402
from contrastlab.finetune.encoder import FinetuneEncoder  # noqa: E402
from contrastlab.finetune.train import Inputs, train_encoder  # noqa: E402
from contrastlab.params.finetune import FinetuneParams  # noqa: E402


def main(out: str) -> None:
    from transformers import AutoTokenizer, BertConfig, BertModel

    from contrastlab.models.teacher import resolve_model

    info = init_distributed("cpu")
    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(resolve_model("minilm"))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    enc = FinetuneEncoder(BertModel(cfg, add_pooling_layer=False), layers=1, proj_dim=8,
                          proj_hidden=16, tokenizer=tok)
    problems = np.array([p for p, _, _ in SNIPPETS])
    tiers = np.array([t for _, t, _ in SNIPPETS])
    y = label_matrix(problems, tiers, label_names(problems))
    ids = enc.tokenize([s for _, _, s in SNIPPETS])
    inp = Inputs(states=enc.lower_states(ids), ids=ids, level=1)
    before = {n: p.detach().clone() for n, p in enc.named_parameters() if p.requires_grad}
    p = FinetuneParams(steps=3, batch_problems=2, batch_per_problem=2, warmup=0.0, lr_encoder=1e-3)
    train_encoder(enc, inp, y, problems, np.arange(len(SNIPPETS)), loss="mulsupcon", cfg=p, seed=0,
                  rank=info.rank)
    after = {n: q.detach() for n, q in enc.named_parameters() if q.requires_grad}
    res = {"moved": max(float((after[n] - before[n]).abs().max()) for n in after),
           "params": {n: after[n].flatten().tolist() for n in after}}
    with open(f"{out}.rank{info.rank}", "w") as fh:
        json.dump(res, fh)
    cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
