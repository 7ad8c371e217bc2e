"""DVC stage ``validate_params``: check the whole ``params.yaml`` before any other stage runs.

Every other stage depends on this stage's output, so ``dvc repro`` runs it first (DVC runs
stages in dependency order). A bad value stops the run here, before DVC removes any other
stage's previous outputs (committed plots and metrics included). Checks: the schema of
every section (:func:`contrastlab.params.load_params`) and each variant's loss-specific keys
against its loss function's keyword arguments
(:func:`contrastlab.params.losses.check_loss_keywords`).

The output ``data/params_ok.json`` holds a constant, so a params change that passes does
not by itself invalidate the stages downstream (each stage still depends on its own params).
``data/loss_code.yaml`` holds, per registered loss and per variant, a digest of the loss's
registry entry and source files (:func:`contrastlab.params.losses.loss_code`); stages that
train a loss depend on their own keys of it, so DVC reruns exactly the variants whose loss
changed. Its ``roles`` section copies the variant table's roles (``variants.yaml`` ``roles:``,
where DVC cannot read them): a stage whose code reads a role depends on its key. Its
``code`` section holds, per stage of ``dvc.yaml``, the digest of the stage script's import
closure (``scripts/stage_deps.py``): every stage depends on its own key in place of the list
of its code files, and this stage depends on all the code.
"""

import sys
from pathlib import Path

import yaml

from _dvc import run

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from stage_deps import code_digests  # noqa: E402  (the pipeline's tool, not the library)

from contrastlab.cli import stage_parser
from contrastlab.io import write_json, write_text
from contrastlab.params import load_params
from contrastlab.params.losses import check_loss_keywords, loss_code


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__.split("\n\n")[0], "--out", "--loss-code")
    args = ap.parse_args(argv)
    p = load_params(args.params)
    check_loss_keywords(p, args.params)
    doc = loss_code(p, yaml.safe_load(Path(args.params).read_text(encoding="utf-8")))
    doc["code"] = code_digests(ROOT) if (ROOT / "dvc.yaml").is_file() else {}
    write_text(args.loss_code, "# written by stages/validate_params.py (do not edit): per stage, "
               "the digest of its code; per loss and per variant, the digest of the loss's "
               "registry entry and source files; per track, its roles (variants.yaml)\n"
               + yaml.safe_dump(doc, sort_keys=True))
    write_json(args.out, {"params": "valid"})
    print(f"{args.params}: valid")
    return 0


if __name__ == "__main__":
    run(main)
