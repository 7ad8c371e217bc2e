"""Fine-tuning a ``transformers`` encoder with multi-label contrastive losses (MulSupCon,
Zhang & Wu, AAAI 2024; ALL / ANY / Sim-Dis, the Sim-Dis paper) or BCE, on HumanEval
problem x correctness-tier variants; evaluation on seen and unseen problems; a FAISS index
of the embeddings for :mod:`contrastlab.query`. See docs/finetune.md.

Submodules (imported on use): :mod:`.data` (splits, labels, sampler), :mod:`.build`
(sandboxed tiers), :mod:`.encoder` (the encoder with cached lower layers), :mod:`.train`
(the training loop), :mod:`.evaluate` (metrics with clustered bootstrap CIs), :mod:`.index`
(FAISS index and MLflow model).
"""
