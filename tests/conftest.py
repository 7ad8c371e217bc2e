"""Shared pytest setup: offline, quiet, deterministic, small thread count."""

import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("CONTRASTLAB_MLFLOW", "0")  # tests that check MLflow turn it back on
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# stages called from tests write their wall times here, not into the checkout's reports/timings
os.environ.setdefault("CONTRASTLAB_TIMINGS", tempfile.mkdtemp(prefix="contrastlab-timings-"))
