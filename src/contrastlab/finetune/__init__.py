"""Fine-tuning a ``transformers`` encoder with multi-label contrastive losses (MulSupCon,
Zhang & Wu, AAAI 2024; ALL / ANY / Sim-Dis, the Sim-Dis paper) or BCE on HumanEval
problem x correctness-tier variants; evaluation on seen and unseen problems; a FAISS index
for :mod:`contrastlab.query`. See docs/finetune.md.
"""
