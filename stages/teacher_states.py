"""DVC stage ``teacher_states``: frozen-teacher states for every extracted function
(:func:`contrastlab.training.code_teacher.run_teacher_states`).

Per function: the signature's token states (fp16 ``[T, H]`` + mask) and the body's mean
embedding at ``code.teacher.layer``, in sharded safetensors under ``data/code/teacher``
with ``index.json``; ``code.teacher.workers`` shards at once in forked CPU processes. A
rerun after an interruption keeps the finished shards (the output is declared ``persist:
true`` in dvc.yaml for that reason).
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.params import load_params
from contrastlab.training.code_teacher import run_teacher_states


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--functions", "--out")
    args = ap.parse_args(argv)
    r = run_teacher_states(load_params(args.params).code, args.functions, args.out)
    print(f"teacher_states: {r['n_functions']} functions, {len(r['shards'])} shards "
          f"({r['reused_shards']} reused), layer {r['layer']}/{r['num_layers_total']}, "
          f"{r['time_s']:.1f}s")
    return 0


if __name__ == "__main__":
    run(main)
