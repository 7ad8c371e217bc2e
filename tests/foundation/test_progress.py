"""Progress bars off a terminal: whole lines, few of them, final state kept."""

import io

from contrastlab.progress import is_interactive, tqdm


def test_non_terminal_stream_gets_plain_lines(monkeypatch):
    monkeypatch.setenv("CONTRASTLAB_PROGRESS_INTERVAL", "3600")
    buf = io.StringIO()
    assert not is_interactive(buf)
    total = sum(tqdm(range(1000), desc="train", file=buf))
    assert total == sum(range(1000))
    out = buf.getvalue()
    assert "\r" not in out
    lines = out.splitlines()
    # first draw and the final state only (the interval is an hour)
    assert 1 <= len(lines) <= 3, lines
    assert lines[-1].startswith("train") and "1000/1000" in lines[-1]


def test_disabled_by_environment(monkeypatch):
    monkeypatch.setenv("CONTRASTLAB_PROGRESS", "0")
    buf = io.StringIO()
    assert list(tqdm(range(3), file=buf)) == [0, 1, 2]
    assert buf.getvalue() == ""


def test_explicit_disable_is_kept():
    buf = io.StringIO()
    list(tqdm(range(3), file=buf, disable=True))
    assert buf.getvalue() == ""
