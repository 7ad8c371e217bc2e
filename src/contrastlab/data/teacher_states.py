"""Teacher states on disk: sharded safetensors plus a small JSON index, resumable.

Shard ``shard_00000.safetensors`` holds, for ``n`` consecutive functions (by ``id``): ``ids``
int64 ``[n]``; ``sig_states`` float16 ``[n, T, H]`` (signature token states at the teacher
layer, zero-padded to ``T = max_sig_tokens``); ``sig_mask`` uint8 ``[n, T]``; ``body_emb``
float32 ``[n, H]`` (mean body token state). Each shard's metadata fingerprints the teacher
settings and its functions' text; a rerun keeps every shard whose fingerprint matches.

The folder is a ``persist: true`` DVC output, so it only ever holds finished files: shards are
written in ``.<name>.partial`` and renamed into place; a run first removes that folder and
anything that is not a shard or ``index.json`` (written last, input-determined values only).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from ..io import save_safetensors, sha256_file, write_json
from ..utils import fork_map

_SHARD = re.compile(r"shard_\d{5}\.safetensors")

__all__ = ["write_teacher_states", "load_teacher_states", "settings_fingerprint"]


def settings_fingerprint(settings: dict[str, Any]) -> str:
    """Short hash of the teacher settings that change the states."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def _content_hash(ids: Sequence[int], sigs: Sequence[str], bodies: Sequence[str]) -> str:
    h = hashlib.sha256()
    for i, s, b in zip(ids, sigs, bodies):
        h.update(f"{i}\0{s}\0{b}\0".encode("utf-8"))
    return h.hexdigest()[:16]


def _shard_ok(path: Path, fingerprint: str, content: str) -> bool:
    try:  # a missing or unreadable shard raises here
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
    except Exception:
        return False
    return meta.get(_META_KEY) == _meta_value(fingerprint, content)


#: One metadata key only: safetensors writes its metadata map in a per-process random order,
#: so two keys would make identical shards differ byte-wise (and change the folder's hash).
_META_KEY = "contrastlab_teacher_states"


def _meta_value(fingerprint: str, content: str) -> str:
    return json.dumps({"content": content, "fingerprint": fingerprint}, sort_keys=True)


def _write_shard(job: dict[str, Any], path: Path, sid: list[int], ssig: list[str],
                 sbody: list[str], content: str) -> None:
    """Encode one shard and move it into place whole (written under ``partial`` first)."""
    sig_list, emb = job["encode"](ssig, sbody)
    states = torch.zeros((len(sid), job["max_sig_tokens"], job["hidden_size"]),
                         dtype=torch.float16)
    mask = torch.zeros((len(sid), job["max_sig_tokens"]), dtype=torch.uint8)
    for r, st in enumerate(sig_list):
        t = min(job["max_sig_tokens"], st.shape[0])
        states[r, :t] = st[:t]
        mask[r, :t] = 1
    tmp = job["partial"] / path.name
    save_safetensors(tmp, {"ids": torch.tensor(sid, dtype=torch.int64),
                           "sig_states": states, "sig_mask": mask,
                           "body_emb": emb.to(torch.float32)},
                     metadata={_META_KEY: _meta_value(job["fp"], content)})
    os.replace(tmp, path)  # a finished shard appears whole, or not at all
    job["log"](f"teacher_states: wrote {path.name} ({len(sid)} functions)")


def write_teacher_states(out_dir: Path, ids: Sequence[int], signatures: Sequence[str],
                         bodies: Sequence[str], encode: Callable[[list[str], list[str]],
                                                                 tuple[list[torch.Tensor], torch.Tensor]],
                         settings: dict[str, Any], max_sig_tokens: int, hidden_size: int,
                         shard_size: int = 1024, log: Callable[[str], None] = print,
                         workers: int = 1) -> dict[str, Any]:
    """Compute and store teacher states shard by shard, skipping finished shards.

    Args:
        out_dir: output folder (created; may hold shards of an interrupted run).
        ids, signatures, bodies: ``N`` functions.
        encode: ``(sigs, bodies) -> (list of [T_i, H] fp16, [n, H] fp32)``, e.g.
            :meth:`contrastlab.models.teacher.TeacherEncoder.encode_functions`.
        settings: everything about the teacher that changes the states (fingerprinted).
        max_sig_tokens: ``T`` of the padded signature states.
        hidden_size: ``H``.
        shard_size: functions per shard.
        workers: shards encoded at once in forked processes (CPU encoders only; every shard
            is encoded alone, so the bytes do not depend on ``workers``).

    Returns:
        The index written to ``out_dir/index.json``, plus ``reused_shards`` (how many
        finished shards this run kept; run-dependent, so not written to the folder).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = out_dir.parent / f".{out_dir.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)  # temporaries of a killed run
    for stray in out_dir.iterdir():
        if not (stray.name == "index.json" or _SHARD.fullmatch(stray.name)) or not stray.is_file():
            log(f"teacher_states: removing {stray.name} (not a finished shard)")
            if stray.is_dir() and not stray.is_symlink():
                shutil.rmtree(stray)
            else:
                stray.unlink()
    partial.mkdir()
    fp = settings_fingerprint(settings)
    n = len(ids)
    shards, todo, reused = [], [], 0
    for s, start in enumerate(range(0, n, shard_size)):
        sl = slice(start, min(n, start + shard_size))
        sid, ssig, sbody = list(ids[sl]), list(signatures[sl]), list(bodies[sl])
        content = _content_hash(sid, ssig, sbody)
        path = out_dir / f"shard_{s:05d}.safetensors"
        if _shard_ok(path, fp, content):
            reused += 1
        else:
            todo.append((path, sid, ssig, sbody, content))
        shards.append({"file": path.name, "start": start, "n": len(sid), "content": content})
    job = {"encode": encode, "partial": partial, "fp": fp, "max_sig_tokens": max_sig_tokens,
           "hidden_size": hidden_size, "log": log}
    if workers <= 1 or len(todo) <= 1:
        for t in todo:
            _write_shard(job, *t)
    else:  # the encoder is inherited by the forked workers, not pickled
        list(fork_map(lambda t: _write_shard(job, *t), todo, workers))
    # drop shards of an older, longer run
    keep = {sh["file"] for sh in shards}
    for old in out_dir.glob("shard_*.safetensors"):
        if old.name not in keep:
            old.unlink()
    for sh in shards:
        sh["sha256"] = sha256_file(out_dir / sh["file"])
    index = {"n_functions": n, "hidden_size": hidden_size, "max_sig_tokens": max_sig_tokens,
             "fingerprint": fp, "settings": settings, "shards": shards}
    write_json(partial / "index.json", index)
    os.replace(partial / "index.json", out_dir / "index.json")
    shutil.rmtree(partial, ignore_errors=True)
    return {**index, "reused_shards": reused}


def load_teacher_states(out_dir: Path) -> dict[str, Any]:
    """Read all shards listed in ``index.json``.

    Returns:
        dict with ``ids`` int64 ``[N]``, ``sig_states`` fp16 ``[N, T, H]``, ``sig_mask`` bool
        ``[N, T]``, ``body_emb`` fp32 ``[N, H]`` (rows in ``id`` order) and ``index``.

    Raises:
        FileNotFoundError: index or a shard missing (run ``teacher_states``).
    """
    from safetensors.torch import load_file

    out_dir = Path(out_dir)
    idx_path = out_dir / "index.json"
    if not idx_path.exists():
        raise FileNotFoundError(f"{idx_path}: missing (run the teacher_states stage)")
    index = json.loads(idx_path.read_text())
    parts: dict[str, list[torch.Tensor]] = {"ids": [], "sig_states": [], "sig_mask": [], "body_emb": []}
    for sh in index["shards"]:
        p = out_dir / sh["file"]
        if not p.exists():
            raise FileNotFoundError(f"{p}: shard listed in index.json is missing")
        t = load_file(str(p))
        for k in parts:
            parts[k].append(t[k])
    out: dict[str, Any] = {k: torch.cat(v) for k, v in parts.items()}
    order = torch.argsort(out["ids"])
    out = {k: v[order] for k, v in out.items()}
    out["sig_mask"] = out["sig_mask"].bool()
    out["index"] = index
    return out
