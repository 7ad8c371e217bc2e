"""torchrun --nproc_per_node=2 (gloo, CPU): each rank's loss share and gradients equal one
process on the concatenated batch within 1e-5, for supcon, mulsupcon, simdis and infonce."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("dist_worker.py")


@pytest.mark.distributed
@pytest.mark.slow
def test_two_process_equivalence(tmp_path):
    out = tmp_path / "diffs.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(WORKER), str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads(Path(f"{out}.rank{r}").read_text()) for r in range(2)]
    for diffs in ranks:
        assert set(diffs) >= {"supcon", "mulsupcon", "simdis", "infonce"}
        for name, d in diffs.items():
            assert d < 1e-5, (name, d)
