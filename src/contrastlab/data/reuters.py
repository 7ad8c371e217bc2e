"""Reuters-21578 (Distribution 1.0), ModApte split, from the raw SGML files.

ModApte (Lewis, README.txt sec. VIII.B): documents with ``LEWISSPLIT="TRAIN"`` or
``"TEST"`` and ``TOPICS="YES"`` (9603 / 3299). The 90-category subset keeps the TOPICS
categories with at least one training and one test document; the documents carrying at
least one of them are 7770 train / 3019 test (NLTK's copy has 7769 train: it drops one
document). Text = TITLE + BODY (DATELINE dropped).

The files are Latin-1 and contain control-character entities such as ``&#5;``; they are
parsed leniently with regular expressions (the SGML is not well-formed XML).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError

__all__ = ["ReutersDoc", "read_reuters", "modapte_90"]

_DOC = re.compile(r"<REUTERS(?P<attrs>[^>]*)>(?P<body>.*?)</REUTERS>", re.S)
_ATTR = re.compile(r'(\w+)="([^"]*)"')
_TOPICS = re.compile(r"<TOPICS>(.*?)</TOPICS>", re.S)
_D = re.compile(r"<D>(.*?)</D>", re.S)
_TITLE = re.compile(r"<TITLE>(.*?)</TITLE>", re.S)
_BODY = re.compile(r"<BODY>(.*?)</BODY>", re.S)
_CTRL = re.compile(r"&#(\d+);")


@dataclass
class ReutersDoc:
    newid: int
    split: str  # LEWISSPLIT: TRAIN | TEST | NOT-USED
    has_topics: bool  # TOPICS="YES"
    topics: list[str]
    text: str


def _clean(s: str) -> str:
    s = _CTRL.sub(lambda m: "" if int(m.group(1)) < 32 else m.group(0), s)
    return " ".join(html.unescape(s).split())


def read_reuters(raw_dir: str | Path) -> list[ReutersDoc]:
    """All 21578 documents of ``raw_dir/reut2-*.sgm`` in NEWID order.

    Raises:
        FileNotFoundError: ``raw_dir`` has no ``reut2-*.sgm`` file (names the folder and the
            ``multilabel.reuters.raw_dir`` param).
        ValueError: a file holds no ``<REUTERS>`` document (names the file).
    """
    raw_dir = Path(raw_dir)
    files = sorted(raw_dir.glob("reut2-*.sgm"))
    if not files:
        raise FileNotFoundError(f"{raw_dir}: no reut2-*.sgm files (set multilabel.reuters.raw_dir)")
    docs: list[ReutersDoc] = []
    for f in files:
        text = f.read_bytes().decode("latin-1")
        n0 = len(docs)
        for m in _DOC.finditer(text):
            attrs = dict(_ATTR.findall(m.group("attrs")))
            body = m.group("body")
            tm = _TOPICS.search(body)
            topics = [t.strip() for t in _D.findall(tm.group(1))] if tm else []
            parts = (_TITLE.search(body), _BODY.search(body))
            txt = " ".join(_clean(x.group(1)) for x in parts if x)
            docs.append(ReutersDoc(int(attrs.get("NEWID", -1)), attrs.get("LEWISSPLIT", ""),
                                   attrs.get("TOPICS", "") == "YES", topics, txt))
        if len(docs) == n0:
            raise InputError(f"{f}: no <REUTERS> documents found")
    docs.sort(key=lambda d: d.newid)
    return docs


def modapte_90(docs: list[ReutersDoc]) -> dict:
    """The ModApte split restricted to the 90 categories with >= 1 train and >= 1 test doc.

    Returns:
        dict with ``train_text``/``test_text`` (lists of str), ``y_train``/``y_test``
        (uint8 ``[N, 90]``), ``labels`` (sorted category names), ``train_ids``/``test_ids``
        (NEWIDs), and the ModApte sizes before the 90-category filter
        (``n_modapte_train``/``n_modapte_test``).
    """
    tr = [d for d in docs if d.has_topics and d.split == "TRAIN"]
    te = [d for d in docs if d.has_topics and d.split == "TEST"]
    cats_tr = {t for d in tr for t in d.topics}
    cats_te = {t for d in te for t in d.topics}
    labels = sorted(cats_tr & cats_te)
    idx = {c: i for i, c in enumerate(labels)}

    def encode(ds: list[ReutersDoc]):
        keep = [d for d in ds if any(t in idx for t in d.topics)]
        y = np.zeros((len(keep), len(labels)), dtype=np.uint8)
        for r, d in enumerate(keep):
            for t in d.topics:
                if t in idx:
                    y[r, idx[t]] = 1
        return keep, y

    ktr, ytr = encode(tr)
    kte, yte = encode(te)
    return {
        "train_text": [d.text for d in ktr], "test_text": [d.text for d in kte],
        "y_train": ytr, "y_test": yte, "labels": labels,
        "train_ids": [d.newid for d in ktr], "test_ids": [d.newid for d in kte],
        "n_modapte_train": len(tr), "n_modapte_test": len(te),
    }
