"""A tiny random 2-layer BERT (built locally, no download) with the packaged MiniLM
tokenizer, and a handful of real code snippets of two problems in three tiers."""

import pytest
import torch


SNIPPETS = [
    # problem A: smallest element
    ("A", "PASS", "def smallest(xs):\n    m = xs[0]\n    for x in xs:\n        if x < m:\n            m = x\n    return m"),
    ("A", "FAIL", "def smallest(xs):\n    m = xs[0]\n    for x in xs:\n        if x >= m:\n            m = x\n    return m"),
    ("A", "PARTIAL", "def smallest(xs):\n    m = xs[1]\n    for x in xs:\n        if x < m:\n            m = x\n    return m"),
    ("A", "FAIL", "def smallest(xs):\n    m = xs[0]\n    for x in xs:\n        pass\n    return m"),
    # problem B: sum of squares
    ("B", "PASS", "def sum_sq(n):\n    total = 0\n    for i in range(n + 1):\n        total += i * i\n    return total"),
    ("B", "PARTIAL", "def sum_sq(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n    return total"),
    ("B", "FAIL", "def sum_sq(n):\n    total = 0\n    for i in range(n + 1):\n        total -= i * i\n    return total"),
    ("B", "FAIL", "def sum_sq(n):\n    total = 0\n    for i in range(n + 1):\n        total += i * i\n    return None"),
]


@pytest.fixture(scope="session")
def tokenizer():
    from transformers import AutoTokenizer

    from contrastlab.models.teacher import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model("minilm"))


@pytest.fixture
def tiny_bert(tokenizer):
    """Factory: a fresh random 2-layer BertModel (hidden 32), seeded, dropout off."""
    from transformers import BertConfig, BertModel

    def make(seed: int = 0, dropout: float = 0.0):
        torch.manual_seed(seed)
        cfg = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
                         hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
        return BertModel(cfg, add_pooling_layer=False).eval()

    return make


@pytest.fixture
def snippets():
    return SNIPPETS
