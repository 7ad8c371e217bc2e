"""Shared pytest setup: offline, quiet, deterministic, small thread count."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("CONTRASTLAB_MLFLOW", "0")  # tests that check MLflow turn it back on
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
