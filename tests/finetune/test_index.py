"""FAISS index + query CLI + MLflow model round trip, on a tiny random BERT."""

import json

import numpy as np
import pytest
import torch

from contrastlab.finetune.encoder import FinetuneEncoder
from contrastlab.finetune.index import EmbeddingModel, load_index, prepare_code, write_index


@pytest.fixture
def index_dir(tmp_path, tiny_bert, tokenizer, snippets):
    enc = FinetuneEncoder(tiny_bert(4), layers=1, proj_dim=8, proj_hidden=16, tokenizer=tokenizer).eval()
    codes = [prepare_code(s, True) for _, _, s in snippets]
    emb = enc.encode(codes)
    rows = [{"id": f"{p}/{i}", "problem": p, "tier": t} for i, (p, t, _) in enumerate(snippets)]
    return write_index(tmp_path / "index", emb, rows, enc, {"strip_docstrings": True}), enc


def test_query_cli_returns_the_planted_submission_first(index_dir, snippets, tmp_path, capsys):
    from contrastlab.query import main

    folder, _ = index_dir
    # the planted submission: snippet 6 (problem B, FAIL) re-submitted with a docstring
    src = snippets[6][2].replace("def sum_sq(n):\n", 'def sum_sq(n):\n    """Sum of squares."""\n')
    f = tmp_path / "q.py"
    f.write_text(src)
    assert main(["--index", str(folder), "--code", str(f), "-k", "3", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)[0]["neighbours"]
    assert [h["rank"] for h in hits] == [1, 2, 3]
    assert hits[0]["id"] == "B/6" and hits[0]["tier"] == "FAIL" and hits[0]["problem"] == "B"
    assert hits[0]["similarity"] == pytest.approx(1.0, abs=1e-5)
    assert hits[1]["similarity"] < hits[0]["similarity"]
    # many submissions at once (.jsonl), plain-text output
    many = tmp_path / "subs.jsonl"
    many.write_text("\n".join(json.dumps({"id": f"q{i}", "code": snippets[i][2]}) for i in (0, 5)))
    assert main(["--index", str(folder), "--codes", str(many), "-k", "1"]) == 0
    out = capsys.readouterr().out
    assert "query q0:" in out and "id A/0" in out and "query q5:" in out and "id B/5" in out


def test_query_cli_bad_input(index_dir, tmp_path):
    from contrastlab.query import read_codes

    from contrastlab.errors import InputError

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    with pytest.raises(InputError, match="no 'code'"):
        read_codes(bad)
    with pytest.raises(FileNotFoundError, match="not an index folder"):
        load_index(tmp_path)


@pytest.mark.slow
def test_mlflow_model_reloads_with_the_same_embeddings(index_dir, snippets, tmp_path, monkeypatch):
    """The logged model is the sentence-transformers flavour (no contrastlab in its
    requirements) and embeds prepared texts as the index's encoder does."""
    mlflow = pytest.importorskip("mlflow")
    from contrastlab.finetune.index import log_to_mlflow

    folder, enc = index_dir
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    # its artifacts under tmp_path (MLflow's default, ./mlruns, is the checkout)
    mlflow.create_experiment("finetune-test", artifact_location=(tmp_path / "artifacts").as_uri())
    mlflow.set_experiment("finetune-test")
    codes = [s for _, _, s in snippets]
    with mlflow.start_run():
        uri = log_to_mlflow(folder)
        arts = {a.path for a in mlflow.MlflowClient().list_artifacts(mlflow.active_run().info.run_id, "index")}
    assert uri is not None and "index/index.faiss" in arts
    local = mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(tmp_path / "m"))
    text = open(f"{local}/requirements.txt").read()
    assert "sentence-transformers==" in text and "contrastlab" not in text
    reloaded = mlflow.sentence_transformers.load_model(uri)
    want = EmbeddingModel(enc, True)(codes)
    got = torch.as_tensor(reloaded.encode([prepare_code(c, True) for c in codes]))
    assert got.shape == (len(codes), 8)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    # and the index folder's own encoder agrees
    _, meta, model = load_index(folder)
    torch.testing.assert_close(model(codes), want, rtol=0, atol=1e-6)
    assert [r["id"] for r in meta["rows"]][:2] == ["A/0", "A/1"]
