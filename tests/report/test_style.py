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


def test_track_figures_go_through_the_style():
    """Every track module draws under ``style.styled``, saves with ``style.save`` and sets
    no font size or figure size of its own (both come from ``style``)."""
    import ast
    import re
    from pathlib import Path

    import contrastlab.reporting as rep

    for track in ("graph", "code", "multilabel"):
        path = Path(rep.__file__).with_name(f"{track}.py")
        src = path.read_text()
        assert "fontsize=" not in src, f"{path.name}: a fixed font size"
        assert not re.search(r"figsize=\(", src), f"{path.name}: a figure size outside style"
        assert ".savefig(" not in src, f"{path.name}: saves without style.save"
        tree = ast.parse(src)
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
            calls = {ast.unparse(c.func) for c in ast.walk(fn) if isinstance(c, ast.Call)}
            draws = {"plt.subplots", "style.panels"} & calls
            if draws:
                decos = {ast.unparse(d) for d in fn.decorator_list}
                assert "style.styled" in decos, f"{path.name}:{fn.name} draws outside the style"


def test_panels_stay_page_wide():
    fig, axes = style.panels(5, height=3.0, max_cols=3)
    w, h = fig.get_size_inches()
    assert len(axes) == 5 and w == style.FIG_WIDTH and h == 6.0  # 2 rows of 3, one hidden
    assert sum(ax.get_visible() for ax in fig.axes) == 5
    plt.close(fig)
    with pytest.raises(ValueError):
        style.panels(0)


def test_styled_does_not_leak_rcparams(tmp_path):
    before = matplotlib.rcParams["font.size"]

    @style.styled
    def draw():
        fig, ax = plt.subplots()
        size = matplotlib.rcParams["font.size"]
        style.save(fig, tmp_path / "x.png")
        return size

    assert draw() == style.RC["font.size"]
    assert matplotlib.rcParams["font.size"] == before
    assert (tmp_path / "x.png").read_bytes()[:4] == b"\x89PNG"


def test_score_axis_on_x():
    fig, ax = plt.subplots()
    lo, hi = style.score_axis(ax, [0.5, 0.8], axis="x")
    assert ax.get_xlim() == (lo, hi) and 0 < lo < 0.5 and 0.8 < hi <= 1.0
    with pytest.raises(ValueError):
        style.score_axis(ax, [0.5], axis="z")
    plt.close(fig)
