"""Rows of the code section: the variant table's baselines, the BM25 hybrids and their
control, the retrieval notes' reference rows, row titles, short labels and order.
"""

from __future__ import annotations

from ..errors import UnknownNameError
from ..losses.registry import method_row, role, track_variants
from . import short_label

_ROWS = {n: v for n, v in track_variants("code").items() if v.kind == "baseline"}
TITLES = {n: v.title for n, v in _ROWS.items()}
BASELINES = list(_ROWS)
SHORT = {n: v.short for n, v in _ROWS.items()}
REFERENCE_BASELINE = role("code", "reference_baseline")  # the dashed line of the Rank@k figure
#: The lexical baseline (BM25) the hybrids fuse with, and the untrained sentence embedding.
BM25, SENTENCE = method_row("code", "lexical"), method_row("code", "sentence_embedding")
#: ``<prefix><L>``: the centred zero-shot baseline with the teacher read at layer ``L``.
_LAYER_PREFIX = f"{method_row('code', 'zero_shot_centred')}_l"


def _is_baseline(name: str) -> bool:
    return name in BASELINES or name.startswith(_LAYER_PREFIX)


def _is_hybrid(name: str) -> bool:
    return name.startswith(("rrf_", "fusion_"))


def _untrained(name: str) -> bool:
    """A baseline, or a BM25 hybrid of a baseline (one deterministic run, no seeds)."""
    return _is_baseline(name) or (_is_hybrid(name) and _is_baseline(name.split("_", 1)[1]))


#: BM25 score-fused with the untrained sentence embedding: the control of the trained fusions.
CONTROL_HYBRID = f"fusion_{SENTENCE}"


def _trained_fusions(names) -> list[str]:
    """The score fusions of ``names`` other than the control (tested against it)."""
    return [n for n in names if n.startswith("fusion_") and n != CONTROL_HYBRID]


REFERENCES = [  # the retrieval notes' rows
    # (name, Rank@1 %, Rank@10 %, corpus, Rank@10 - 5 % target in points)
    ("Retrieval notes Exp 1.3 SmoothL1 (test, Qwen2.5-Coder-3B L18, reported)", "0.03", "0.24", 49631, -4.76),
    ("Retrieval notes Exp 1.4 target (test; a target, not a result)", "> 1", "> 5", 49631, None),
]


def _title(name: str, m: dict | None) -> str:
    """Row title: a baseline's, else the loss's registry title (``LossSpec.title``) and
    whether the predictor started at the zero-shot map (residual) or from scratch."""
    if name in TITLES:
        return TITLES[name]
    m = m or {}
    if m.get("title") and not _is_hybrid(name):  # a row that declares its title (bi-encoder rows)
        return m["title"]
    if name.startswith(_LAYER_PREFIX):
        return f"zero-shot teacher, centred, layer {name.rsplit('_l', 1)[1]} (baseline)"
    if _is_hybrid(name):
        what = ("baseline" if _is_baseline(m.get("variant", "")) else "fine-tuned encoder"
                if (m.get("_variant_metrics") or {}).get("trainer") else "predictor")
        kind = (f"BM25 + {what}, reciprocal-rank fusion" if name.startswith("rrf_") else
                f"BM25 + {what}, score fusion (w={m.get('weight', float('nan')):g})")
        return f"{kind}: {_title(m.get('variant', name.split('_', 1)[1]), m.get('_variant_metrics'))}"
    if not m.get("loss"):
        return name
    spec = _spec(m["loss"])  # a loss no longer registered keeps its key
    start = "from the zero-shot map" if m.get("residual") else "from scratch"
    return f"{spec.title if spec else name}, {start}"


def _short(name: str, m: dict | None) -> str:
    """Short row label: a baseline's :data:`SHORT`; a trained row's loss short label with
    ``(zs)`` or ``(scratch)``; a hybrid ``BM25 ⊕ <row>`` or ``RRF(BM25, <row>)``."""
    m = m or {}
    if name in SHORT:
        return SHORT[name]
    if name.startswith(_LAYER_PREFIX):
        return f"zero-shot centred L{name.rsplit('_l', 1)[1]}"
    if _is_hybrid(name):
        inner = _short(m.get("variant", name.split("_", 1)[1]), m.get("_variant_metrics"))
        return f"RRF(BM25, {inner})" if name.startswith("rrf_") else f"BM25 ⊕ {inner}"
    loss = m.get("loss")
    if not loss:
        return name
    if m.get("trainer"):  # a fine-tuned bi-encoder row (contrastlab.biencoder)
        label = ("Bi-enc ST (MNRL)" if m["trainer"] == "sentence_transformers"
                 else f"Bi-enc {short_label('code', loss)}")
        return label + (", all layers" if m.get("layers") == "all" else "")  # not a loss name
    return f"{short_label('code', loss)} ({'zs' if m.get('residual') else 'scratch'})"


def _spec(loss: str | None):
    """The loss's registry spec, or ``None`` (no loss, or one no longer registered)."""
    from ..losses import get_spec

    try:
        return get_spec(loss) if loss else None
    except UnknownNameError:
        return None


def _contrastive(loss: str | None) -> bool:
    """The loss has in-batch negatives and a temperature (registry ``needs == "targets"``)."""
    return (spec := _spec(loss)) is not None and spec.needs == "targets"


def _order(metrics: dict) -> list[str]:
    """Baselines, residual rows, rows trained from scratch, then the BM25 hybrids."""
    base = [n for n in TITLES if n in metrics] + sorted(
        n for n in metrics if _is_baseline(n) and n not in TITLES)
    trained = [n for n in metrics if not _is_baseline(n) and not _is_hybrid(n)]
    return (base + sorted(trained, key=lambda n: not metrics[n].get("residual"))
            + sorted((n for n in metrics if _is_hybrid(n)), key=lambda n: (n.split("_", 1)[1], n)))

