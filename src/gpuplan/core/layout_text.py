"""The one place that words a parallel layout, in its three renderings (pure):

- `candidate_layout_text`: a plan candidate's typed layout, short, for tables: "zero=3 tp=2 mb=4 ckpt",
  "tp=4 x2 replicas, batch 32" (the reports and the web page; the two words are the report language's);
- `compact_layout_text`: the same in one word for the terminal: "zero3·tp2·mb4·ckpt", "tp4·x2·b32";
- `estimate_layout_text`: an estimate's layout dict (`EstimateResult.hardware.layout`), for reasons:
  "ZeRO-3, tp 2" for training, "tp 4, 2 replicas" for inference (`gpuplan check`);
- `launch_layout_text`: the full sentence at the head of a launcher file (`gpuplan export`);
- `layout_items_text`: a layout dict as it is, "zero=3, tp=2" (the estimate and fit tables).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuplan.schema.plan import CandidateLayout


def candidate_layout_text(lay: CandidateLayout, replicas: str = "replicas", batch: str = "batch") -> str:
    """"zero=3 tp=2 mb=4 ckpt" for training; "tp=4 x2 replicas, batch 32" for serving."""
    if lay.serving:
        return f"tp={lay.tp} x{lay.replicas} {replicas}, {batch} {lay.batch_per_replica}"
    parts = [f"zero={lay.zero}"] + [f"{k}={v}" for k, v in (("tp", lay.tp), ("pp", lay.pp)) if v > 1]
    if lay.micro_batch_size is not None:
        parts.append(f"mb={lay.micro_batch_size}")
    if lay.gradient_checkpointing:
        parts.append("ckpt")
    return " ".join(parts)


def compact_layout_text(lay: CandidateLayout) -> str:
    """One word, for the terminal's narrow columns: "zero3·tp2·mb4·ckpt" for training; "tp4·x2·b32" (2 replicas of
    tensor parallel 4, a batch of 32 each) for serving."""
    if lay.serving:
        return "·".join([f"tp{lay.tp}", *([f"pp{lay.pp}"] if lay.pp > 1 else []), f"x{lay.replicas}",
                         f"b{lay.batch_per_replica}"])
    return candidate_layout_text(lay).replace("=", "").replace(" ", "·")


def estimate_layout_text(lay: Mapping[str, int | str], training: bool = True) -> str:
    """"ZeRO-3, tp 2" for training; "tp 4, 2 replicas" for inference."""
    parts = [f"ZeRO-{lay.get('zero', 0)}"] if training else []
    parts += [f"{k} {lay[k]}" for k in ("tp", "pp") if int(lay.get(k, 1)) > 1]
    if not training and int(lay.get("dp", 1)) > 1:
        parts.append(f"{lay['dp']} replicas")
    if lay.get("offload", "none") != "none":
        parts.append(f"offload {lay['offload']}")
    return ", ".join(parts) or "one GPU per replica"


def launch_layout_text(*, zero: int, offload: str, tp: int, pp: int, dp: int, micro: int, accum: int,
                       global_batch: int, ckpt: bool, precision: str, task: str) -> str:
    """The sentence a launcher file opens with: every degree, the batch arithmetic, checkpointing, precision."""
    return (f"Layout: ZeRO-{zero}{'' if offload == 'none' else f' (offload {offload} to CPU)'}, tensor "
            f"parallel {tp}, pipeline parallel {pp}, data parallel {dp}; micro-batch {micro} x {accum} "
            f"accumulation step(s) x {dp} = global batch {global_batch}; gradient checkpointing "
            f"{'on' if ckpt else 'off'}; precision {precision}; task {task}.")


def layout_items_text(lay: Mapping[str, object]) -> str:
    """Every key of a layout dict, in its order: "zero=3, tp=2, offload=none"."""
    return ", ".join(f"{k}={v}" for k, v in lay.items())


__all__ = ["candidate_layout_text", "compact_layout_text", "estimate_layout_text", "launch_layout_text",
           "layout_items_text"]
