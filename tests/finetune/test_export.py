"""The saved encoder loads without contrastlab: a clean interpreter (isolated mode, no
contrastlab on its path -- asserted) reloads the index's ``model/`` folder with
sentence-transformers and with plain transformers + the documented pooling and head, and
both give the encoder's embeddings."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from contrastlab.finetune.encoder import FinetuneEncoder
from contrastlab.finetune.export import ST_FILES, export_sentence_transformers
from contrastlab.finetune.index import prepare_code

CLEAN = textwrap.dedent("""
    import json, os, sys
    # a sys.path without contrastlab: drop every entry it could be imported from
    # (the working tree's src/ and the editable install's .pth entry)
    sys.path[:] = [p for p in sys.path if not os.path.isdir(os.path.join(p or ".", "contrastlab"))]
    try:
        import contrastlab  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("contrastlab is importable in the clean interpreter")
    folder, texts_file, out_file = sys.argv[1:4]
    texts = json.load(open(texts_file))
    import numpy as np
    import torch
    from safetensors.torch import load_file
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    st = SentenceTransformer(folder, device="cpu").encode(texts, convert_to_numpy=True)
    # plain transformers: backbone, masked mean pooling, the two Dense layers, L2 norm
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    pooling = json.load(open(os.path.join(folder, "1_Pooling", "config.json")))
    assert pooling["pooling_mode"] == "mean", pooling
    b = tok(texts, padding=True, truncation=True, max_length=tok.model_max_length, return_tensors="pt")
    with torch.no_grad():
        h = model(**b).last_hidden_state
        m = b["attention_mask"].unsqueeze(-1).float()
        x = (h * m).sum(1) / m.sum(1)
        d1, d2 = (load_file(os.path.join(folder, d, "model.safetensors")) for d in ("2_Dense", "3_Dense"))
        x = torch.relu(x @ d1["linear.weight"].T + d1["linear.bias"])
        x = x @ d2["linear.weight"].T + d2["linear.bias"]
        x = torch.nn.functional.normalize(x, dim=-1)
    np.savez(out_file, st=st, hf=x.numpy(), modules=[m for m in sys.modules if m.startswith("contrastlab")])
""")


@pytest.fixture
def saved(tmp_path, tiny_bert, tokenizer):
    enc = FinetuneEncoder(tiny_bert(7), layers=1, proj_dim=8, proj_hidden=16, tokenizer=tokenizer,
                          max_length=24)
    torch.manual_seed(1)
    for p in enc.head.parameters():  # a head that is not the initialisation
        p.data += 0.3 * torch.randn_like(p)
    folder = enc.eval().save(tmp_path / "model", {"strip_docstrings": True})
    return export_sentence_transformers(folder, enc), enc


@pytest.mark.slow
def test_clean_interpreter_reloads_with_the_same_embeddings(saved, snippets, tmp_path):
    folder, enc = saved
    long = "def f(x):\n" + "\n".join(f"    x = x + {i}" for i in range(40)) + "\n    return x"
    texts = [prepare_code(s, True) for _, _, s in snippets] + [long]  # the last is truncated
    assert len(enc.tokenize([long])[0]) == 24
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    out = tmp_path / "out.npz"
    r = subprocess.run([sys.executable, "-I", "-c", CLEAN, str(folder), str(tmp_path / "texts.json"), str(out)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                            "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-3000:]
    got = np.load(out)
    assert len(got["modules"]) == 0
    want = enc.encode(texts).numpy()
    assert got["st"].shape == want.shape == (len(texts), 8)
    np.testing.assert_allclose(got["st"], want, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got["hf"], want, atol=1e-5, rtol=0)
    # the comparison bites: another head's embeddings are far outside the tolerance
    with torch.no_grad():
        enc.head[2].bias += 0.1
    assert np.abs(got["st"] - enc.encode(texts).numpy()).max() > 1e-3
    assert np.abs(want[0] - want[4]).max() > 1e-3  # and the texts embed differently


def test_export_keeps_the_contrastlab_folder_loadable(saved, snippets):
    folder, enc = saved
    for name in ST_FILES:
        if name != "config_sentence_transformers.json" or (folder / name).exists():
            assert (folder / name).exists(), name
    again = FinetuneEncoder.load(folder)
    codes = [prepare_code(s, True) for _, _, s in snippets]
    torch.testing.assert_close(again.encode(codes), enc.encode(codes), rtol=0, atol=1e-6)
