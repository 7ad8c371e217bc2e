"""``python tests/_dvc_cached.py ARGS``: DVC's own command line (``dvc ARGS``), with each params
file parsed once per process.

DVC 3 reads a stage's params files for each stage it checks: one ``dvc status`` of this
pipeline (some 200 stages, each with ``params.yaml`` and ``data/loss_code.yaml``) parses them
about 400 times, most of its 16 CPU-seconds. Here a parsed file is reused while its path, size
and modification time are unchanged (no file changes during one command), so what DVC prints
is what ``dvc ARGS`` prints. Tests that run ``dvc status`` on a project copy use it.
"""

from __future__ import annotations

import os
import sys

from dvc.dependency import param

_load_path = param.load_path
_parsed: dict = {}


def _load_path_once(fs_path, fs, **kwargs):
    if getattr(fs, "protocol", None) != "local":
        return _load_path(fs_path, fs, **kwargs)
    st = os.stat(fs_path)
    key = (fs_path, st.st_size, st.st_mtime_ns, tuple(sorted(kwargs.items())))
    if key not in _parsed:
        _parsed[key] = _load_path(fs_path, fs, **kwargs)
    return _parsed[key]


# dvc.dependency.param.read_param_file calls it by this global name; should a DVC release stop
# doing so, the cache would silently do nothing (the same output, only slower): fail instead
assert "load_path" in param.read_param_file.__code__.co_names, "DVC no longer reads params via load_path"
param.load_path = _load_path_once

if __name__ == "__main__":
    from dvc.cli import main

    sys.exit(main(sys.argv[1:]))
