"""View augmentations: sparse and dense feature masking agree; rates and seeding."""

import torch

from contrastlab.training.graph import drop_edges, mask_features


def test_column_mask_sparse_equals_dense():
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(50, 40, generator=g) < 0.1).float()
    a = mask_features(x, 0.4, torch.Generator().manual_seed(1), "column")
    b = mask_features(x.to_sparse_coo().coalesce(), 0.4, torch.Generator().manual_seed(1), "column")
    torch.testing.assert_close(a, b.to_dense())
    dropped = (a.sum(0) == 0) & (x.sum(0) > 0)
    assert dropped.any() and not dropped.all()  # whole feature columns removed


def test_element_mask_and_edge_dropout_rates():
    g = torch.Generator().manual_seed(0)
    x = torch.ones(200, 100)
    kept = float(mask_features(x, 0.3, g, "element").mean())
    assert abs(kept - 0.7) < 0.02
    sx = x.to_sparse_coo().coalesce()
    assert abs(float(mask_features(sx, 0.3, g, "element").to_dense().mean()) - 0.7) < 0.02
    ei = torch.randint(0, 100, (2, 5000), generator=g)
    out = drop_edges(ei, 0.4, torch.Generator().manual_seed(2))
    assert abs(out.shape[1] / 5000 - 0.6) < 0.03
    torch.testing.assert_close(out, drop_edges(ei, 0.4, torch.Generator().manual_seed(2)))
    assert drop_edges(ei, 0.0) is ei and mask_features(x, 0.0) is x
