"""torchrun --nproc_per_node=2 (gloo, CPU): ranks draw different batches, yet gradients are
averaged, so every rank ends with the same trainable parameters, which did move."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

WORKER = Path(__file__).with_name("dist_worker.py")


@pytest.mark.distributed
@pytest.mark.slow
def test_ranks_stay_in_sync(tmp_path):
    out = tmp_path / "params.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(WORKER), str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r0, r1 = (json.loads(Path(f"{out}.rank{r}").read_text()) for r in range(2))
    assert r0["moved"] > 1e-4 and r1["moved"] > 1e-4
    assert r0["params"].keys() == r1["params"].keys()
    for n in r0["params"]:
        np.testing.assert_allclose(r0["params"][n], r1["params"][n], rtol=0, atol=1e-6, err_msg=n)
