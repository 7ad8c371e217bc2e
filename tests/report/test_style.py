"""Report figure style: page-width figures, axes framed on the data, references apart."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from contrastlab.reporting import style  # noqa: E402


def test_apply_sets_page_width_and_legible_fonts(tmp_path):
    style.apply()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="x")
    ax.legend()
    path = tmp_path / "f.png"
    fig.savefig(path)
    plt.close(fig)
    from contrastlab.reporting.html import png_size

    w, _ = png_size(path)
    assert w >= 800  # 10.5 in at 100 dpi, less the margins the tight bounding box trims
    assert matplotlib.rcParams["legend.fontsize"] >= 9


def test_score_axis_frames_the_scores_not_zero():
    fig, ax = plt.subplots()
    lo, hi = style.score_axis(ax, [0.79, 0.80, 0.817], include=[0.823])
    plt.close(fig)
    assert 0.7 <= lo < 0.79 and 0.823 < hi <= 0.9
    assert lo > 0.0  # not from zero: differences of 1-3 points stay visible
    fig, ax = plt.subplots()
    lo, hi = style.score_axis(ax, [0.96, 0.99])
    plt.close(fig)
    assert hi == 1.0  # never above the metric's bound
    with pytest.raises(ValueError):
        style.score_axis(ax, [float("nan")])


def test_reference_labels_do_not_overlap():
    style.apply()
    fig, ax = plt.subplots(figsize=style.figsize(4))
    ax.bar(["a", "b"], [0.80, 0.81])
    refs = {"GRACE (Zhu et al. 2020)": 0.820, "DGI (Velickovic et al. 2019)": 0.823,
            "BGRL (Thakoor et al. 2022)": 0.821}
    style.score_axis(ax, [0.80, 0.81], include=refs.values())
    texts = style.reference_lines(ax, refs)
    fig.canvas.draw()
    from matplotlib.text import Text

    boxes = [Text.get_window_extent(t) for t in texts]  # the label, not its leader line
    plt.close(fig)
    assert len(boxes) == 3
    for i in range(3):
        for j in range(i + 1, 3):
            assert not boxes[i].overlaps(boxes[j]), (texts[i].get_text(), texts[j].get_text())
