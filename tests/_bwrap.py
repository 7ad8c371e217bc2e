"""``needs_bwrap``: skip a test (or a module, as ``pytestmark``) where bubblewrap cannot run,
saying why (the sandbox tests of tests/multilabel/)."""

import pytest

from contrastlab.sandbox import SandboxUnavailable, sandbox_mode

try:
    sandbox_mode(False)
    _WHY = ""
except SandboxUnavailable as e:  # pragma: no cover - depends on the machine
    _WHY = str(e)
needs_bwrap = pytest.mark.skipif(bool(_WHY), reason=f"bubblewrap cannot run here: {_WHY}")
