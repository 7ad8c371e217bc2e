"""contrastlab: a reproducible workbench for comparing contrastive losses.

The library knows nothing of DVC: every piece (losses, data loaders, models, training
loops, metrics) is importable from a notebook. The pipeline's stage scripts in
``stages/`` read ``params.yaml``, call the library and write outputs atomically.
"""

__version__ = "0.1.0"
