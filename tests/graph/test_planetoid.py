"""Any Planetoid-format graph by name: a tiny synthetic CiteSeer-named raw folder, written
the way the Planetoid files are (pickled scipy CSR / numpy one-hot / adjacency dict, a text
test index), goes through checksum verification, PyG's loader and the training code."""

from __future__ import annotations

import hashlib
import pickle
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from contrastlab.data.planetoid import (PLANETOID_NAMES, canonical_name, load_planetoid,
                                        prepare_planetoid, raw_files)

ROOT = Path(__file__).resolve().parents[2]
N_TRAIN, N_ALLX, N_TEST, F, C = 12, 520, 30, 16, 3   # PyG takes 500 validation nodes after train


def write_planetoid(folder: Path, name: str, seed: int = 0, isolated_gap: bool = True) -> Path:
    """Write ``folder/raw/ind.<name>.*`` + ``folder/SHA256SUMS``; return ``folder``.

    Test nodes get indices ``N_ALLX ..`` with one index skipped when ``isolated_gap`` (like
    CiteSeer's isolated test nodes, which PyG pads with zero rows)."""
    rng = np.random.default_rng(seed)
    prefix = name.lower()
    raw = folder / "raw"
    raw.mkdir(parents=True)
    labels_all = rng.integers(0, C, N_ALLX)
    labels_test = rng.integers(0, C, N_TEST)
    # class-dependent binary features so a probe has something to find
    def feats(labels):
        x = (rng.random((len(labels), F)) < 0.15).astype(np.float32)
        x[np.arange(len(labels)), labels] = 1.0
        return sp.csr_matrix(x)

    onehot = lambda y: np.eye(C, dtype=np.int64)[y]  # noqa: E731
    allx, tx = feats(labels_all), feats(labels_test)
    test_idx = np.arange(N_ALLX, N_ALLX + N_TEST + (1 if isolated_gap else 0))
    if isolated_gap:
        test_idx = np.delete(test_idx, N_TEST // 2)
    n_nodes = int(test_idx.max()) + 1
    graph = defaultdict(list)
    for i in range(n_nodes):
        for j in rng.choice(n_nodes, 3, replace=False):
            if j != i:
                graph[i].append(int(j))
                graph[int(j)].append(i)
    objs = {"x": allx[:N_TRAIN], "y": onehot(labels_all[:N_TRAIN]), "allx": allx,
            "ally": onehot(labels_all), "tx": tx, "ty": onehot(labels_test), "graph": graph}
    for part, obj in objs.items():
        with open(raw / f"ind.{prefix}.{part}", "wb") as f:
            pickle.dump(obj, f, protocol=2)
    perm = rng.permutation(test_idx)  # Planetoid's test.index is not sorted
    (raw / f"ind.{prefix}.test.index").write_text("\n".join(map(str, perm)) + "\n")
    lines = [f"{hashlib.sha256((raw / f).read_bytes()).hexdigest()}  {f}" for f in raw_files(name)]
    (folder / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    return folder


def test_names_and_raw_files():
    assert canonical_name("citeseer") == "CiteSeer" and canonical_name("PubMed") == "PubMed"
    assert raw_files("CiteSeer")[0] == "ind.citeseer.x" and len(raw_files("Cora")) == 8
    with pytest.raises(ValueError, match="known: Cora, CiteSeer, PubMed"):
        canonical_name("Reddit")
    assert set(PLANETOID_NAMES.values()) == {"Cora", "CiteSeer", "PubMed"}


def test_citeseer_named_raw_folder_loads_with_its_public_split(tmp_path):
    raw = write_planetoid(tmp_path / "vendor" / "CiteSeer", "CiteSeer")
    out = tmp_path / "planetoid"
    # a synthetic graph is not the public CiteSeer: the statistics check says so
    with pytest.raises(ValueError, match="CiteSeer does not match the public"):
        prepare_planetoid(raw, out, "CiteSeer")
    assert not out.exists()  # nothing half-written
    stats = prepare_planetoid(raw, out, "citeseer", check=False)
    n_nodes = N_ALLX + N_TEST + 1  # + the isolated test node PyG pads
    assert stats["num_nodes"] == n_nodes and stats["num_features"] == F
    assert (stats["num_train"], stats["num_val"], stats["num_test"]) == (N_TRAIN, 500, N_TEST)
    assert stats["num_classes"] == C
    data, n_cls = load_planetoid(out, "CiteSeer", check=False)
    assert (out / "CiteSeer" / "raw" / "ind.citeseer.graph").is_file()
    assert data.x.shape == (n_nodes, F) and n_cls == C
    assert not (data.train_mask & data.test_mask).any() and not (data.val_mask & data.test_mask).any()
    with pytest.raises(FileNotFoundError, match="PubMed not prepared"):
        load_planetoid(out, "PubMed")


def test_checksums_are_verified(tmp_path):
    raw = write_planetoid(tmp_path / "v", "CiteSeer")
    with open(raw / "raw" / "ind.citeseer.ty", "ab") as f:
        f.write(b"!")
    with pytest.raises(ValueError, match=r"ind\.citeseer\.ty: SHA-256 mismatch"):
        prepare_planetoid(raw, tmp_path / "o", "CiteSeer", check=False)
    (raw / "raw" / "ind.citeseer.x").unlink()
    with pytest.raises(FileNotFoundError, match=r"ind\.citeseer\.x"):
        prepare_planetoid(raw, tmp_path / "o", "CiteSeer", check=False)


def test_citeseer_runs_the_graph_training_and_probe(tmp_path):
    """The graph track's library path on the CiteSeer-named data: train a few steps, embed,
    probe (what train_graph / evaluate_graph do)."""
    import torch

    from contrastlab.evaluation.probe import logreg_probe
    from contrastlab.training.graph import embed, make_graph_loss, train_graph_ssl

    raw = write_planetoid(tmp_path / "v", "CiteSeer")
    prepare_planetoid(raw, tmp_path / "p", "CiteSeer", check=False)
    data, _ = load_planetoid(tmp_path / "p", "CiteSeer", check=False)
    res = train_graph_ssl(data, make_graph_loss("ntxent", temperature=0.5), epochs=3, lr=1e-3,
                          weight_decay=0.0, seed=0, hidden_dim=16, out_dim=8, proj_dim=8,
                          batch_nodes=64, progress=False)
    assert len(res.losses) == 3 and all(np.isfinite(res.losses))
    z = embed(res.encoder, data)
    assert z.shape == (data.num_nodes, 8) and torch.isfinite(z).all()
    out = logreg_probe(z.numpy(), data.y.numpy(), data.train_mask.numpy(), data.val_mask.numpy(),
                       data.test_mask.numpy(), c_grid=[1.0])
    assert 0.0 <= out["test_acc"] <= 1.0
