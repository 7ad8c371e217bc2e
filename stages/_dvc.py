"""The stage scripts' one link to DVC: what ``dvc repro`` and ``dvc exp run`` tell a stage
through its environment, handed to the library (which reads no DVC variable) as a
:class:`contrastlab.invocation.Invocation`:

- ``DVC_EXP_NAME``: the experiment's name under ``dvc exp run`` (MLflow run names and tags,
  the report's header);
- ``DVC_EXP_BASELINE_REV``: the commit the experiment started from (a tag);
- ``DVC_ROOT``: the repository, also when a queued experiment runs in a copy below
  ``.dvc/tmp/exps`` (where ``mlflow.db`` and ``mlartifacts`` live).
"""

import os
import sys
from pathlib import Path
from typing import Callable, Mapping

from contrastlab.cli import run_stage
from contrastlab.invocation import Invocation


def invocation(environ: Mapping[str, str] = os.environ) -> Invocation:
    """The invocation DVC's variables in ``environ`` describe (empty outside DVC)."""
    root = environ.get("DVC_ROOT")
    return Invocation(experiment=environ.get("DVC_EXP_NAME") or None,
                      baseline_rev=environ.get("DVC_EXP_BASELINE_REV") or None,
                      store_root=Path(root) if root else None)


def run(main: Callable[[], int | None]) -> None:
    """Run a stage's ``main`` in DVC's invocation and exit with its status
    (:func:`contrastlab.cli.run_stage`: exit 2 and a one-line message on bad input)."""
    sys.exit(run_stage(main, invocation()))
