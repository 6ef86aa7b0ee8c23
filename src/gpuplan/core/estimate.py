"""`gpuplan estimate` as one pure function: for a project's model on one GPU type and layout (or none), the peak
memory per GPU with its breakdown, the FLOPs, and the training time or the serving speed. The API resolves the
model and finds the GPU row; everything computed here is arithmetic over typed data."""

from __future__ import annotations

import datetime

from gpuplan.core.sizing.engine_memory import (
    admitted_memory,
    engine_cap,
    estimate_serving_memory,
    in_flight_bytes,
    in_flight_requests,
    serving_layout,
    serving_start_bytes,
    serving_usable,
)
from gpuplan.core.sizing.engines import serving_for
from gpuplan.core.sizing.flops import forward_flops, training_flops
from gpuplan.core.sizing.grpo import check_grpo, with_rollout
from gpuplan.core.sizing.grpo_pools import trainer_pool
from gpuplan.core.sizing.memory import estimate_memory, memory_out, resolve
from gpuplan.core.sizing.params import ParamCount, count_params
from gpuplan.core.sizing.preference import SEQUENCES_PER_PAIR, check_dpo, in_pairs, policy_noted, reference_forward
from gpuplan.core.sizing.project import training_tokens
from gpuplan.core.sizing.speed import estimate_inference_speed, estimate_training_speed, tokens_per_sample
from gpuplan.errors import InputError
from gpuplan.schema.estimate import ActivationTable, MemoryEstimate, Note, Overheads
from gpuplan.schema.hardware import Gpu
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Hardware, Layout, Project, Workload
from gpuplan.schema.result import EstimateResult, HardwareInfo, ModelInfo
from gpuplan.schema.serving import ServingData
from gpuplan.schema.speed import ComputeOut, InferenceSpeed, SpeedModel, TimeEstimate
from gpuplan.units import GIB

#: workload keys that only mean something when serving (the load, its objectives, the engine's memory share)
SERVING_ONLY = ("arrival_rate", "users", "think_time_s", "prompt_tokens_std", "output_tokens_std", "slo", "use_case",
                "gpu_memory_utilization", "engine", "speculative")
#: workload keys an estimate echoes only for serving, and only for training
INFERENCE_KEYS = frozenset({"batch_size", "context_length", "output_tokens", "weights_dtype", "kv_cache_dtype",
                            "prefill_tokens", "target_latency_s", "arrival_rate", "arrival", "users", "think_time_s",
                            "prompt_tokens_std", "output_tokens_std", "slo", "use_case", "gpu_memory_utilization",
                            "engine", "speculative"})
TRAINING_KEYS = frozenset({"precision", "optimizer", "optimizer_implementation", "micro_batch_size",
                           "global_batch_size", "sequence_length", "target_length", "gradient_checkpointing", "lora",
                           "tokens", "epochs", "tf32"})


def check_workload(arch: ModelArch, w: Workload) -> None:
    """InputError when the workload asks what the architecture cannot do."""
    check_dpo(arch, w)
    check_grpo(arch, w)
    if arch.kind == "cnn" and w.task in ("lora", "qlora"):
        raise InputError(["workload", "task"], f"{w.task} adapts linear layers of transformers; "
                         f"{arch.model_type} is a CNN", "pretrain, full-finetune, inference")
    if arch.kind == "cnn" and w.gradient_checkpointing:
        raise InputError(["workload", "gradient_checkpointing"], f"transformers has no gradient checkpointing for "
                         f"{arch.model_type}", "false")
    if w.task == "inference" and arch.kind in ("encoder", "vit", "cnn") and w.kv_cache_dtype:
        raise InputError(["workload", "kv_cache_dtype"], f"{arch.model_type} keeps no KV cache")
    if w.task != "inference":
        for key in SERVING_ONLY:
            if getattr(w, key) is not None:
                raise InputError(["workload", key], f"a serving load or objective; task {w.task} trains",
                                 "task: inference, or drop the key")


def _training(project: Project, arch: ModelArch, params: ParamCount, mem: MemoryEstimate, hw: Hardware,
              gpu: Gpu | None, speed: SpeedModel, table: ActivationTable,
              notes: list[Note], serving: ServingData | None = None) -> tuple[ComputeOut, TimeEstimate | None]:
    w = project.workload
    r = resolve(arch, w)
    total, how = training_tokens(project, tokens_per_sample(arch, w))
    fwd = forward_flops(arch, params, r.seq, target=r.target, eager=w.attention == "eager", image_size=r.seq)
    tf = training_flops(fwd, frozen_base=w.task in ("lora", "qlora"), checkpointing=w.gradient_checkpointing,
                        reference_forward=reference_forward(w))
    compute = ComputeOut(flops_per_token=tf.model_per_token, hardware_flops_per_token=tf.hardware_per_token,
                         flops_total=tf.model_per_token * total if total else None)
    time = None
    if gpu is not None:
        sp = estimate_training_speed(arch, params, w, hw.layout, hw.gpus, gpu, speed, table,
                                     trainable=mem.trainable_parameters, total_tokens=total, serving=serving)
        time, compute = sp.time, sp.compute
        notes += sp.notes
        if how and time is not None:
            time = time.model_copy(update={"assumptions": [*time.assumptions, f"training tokens: {how}"]})
    if total is None:
        notes.append(Note(code="no-training-length", message="give workload.tokens, or workload.epochs and "
                          "data.samples, for the run's FLOPs, wall time and GPU-hours"))
    return compute, time


def _serving(w: Workload, arch: ModelArch, params: ParamCount, mem: MemoryEstimate, hw: Hardware, gpu: Gpu | None,
             speed: SpeedModel, notes: list[Note], serving: ServingData) -> tuple[ComputeOut, InferenceSpeed | None]:
    r = resolve(arch, w)
    fwd = forward_flops(arch, params, r.seq, eager=w.attention == "eager", image_size=r.seq)
    compute = ComputeOut(flops_per_token=fwd.forward / fwd.tokens, hardware_flops_per_token=fwd.forward / fwd.tokens,
                         flops_total=None)
    if gpu is None:
        return compute, None
    # the engine keeps everything but the KV cache; the KV blocks fill the rest of its share of the memory
    reserved = mem.device_bytes - mem.breakdown.kv_cache_bytes
    sp = estimate_inference_speed(arch, params, w, hw.layout, hw.gpus, gpu, speed, serving=serving,
                                  reserved_bytes=reserved)
    notes += sp.notes
    return sp.compute, sp.inference


def kv_notes(arch: ModelArch, w: Workload, holds: int | None, inf: InferenceSpeed | None) -> list[Note]:
    """A warning when the load keeps more requests in flight per replica than the engine's KV cache holds: the
    engine starts and admits what fits; the rest wait in its queue, as the latency figures count them."""
    if holds is None or inf is None or inf.replicas < 1:
        return []
    per_replica = w.batch_size if inf.load == "batch_size" else inf.concurrency / inf.replicas
    r = resolve(arch, w)
    if holds < 1 or per_replica <= holds:
        return []
    return [Note(code="kv-cache-full", severity="warning",
                 message=f"the engine's KV cache holds {holds} request(s) of {r.seq:,} + {w.output_tokens or 256:,} "
                         f"tokens per replica ({inf.kv_cache_tokens:,} tokens); of the {per_replica:,.0f} in flight "
                         "the rest wait in its queue, which the latency figures count: more replicas, more tensor "
                         "parallelism or a GPU with more memory to admit them")]


def shown_workload(arch: ModelArch, w: Workload) -> dict[str, object]:
    """The workload as the estimate ran it: the keys of its task, with the model's defaults filled in."""
    r = resolve(arch, w)
    drop = INFERENCE_KEYS if r.training else TRAINING_KEYS
    workload = {k: v for k, v in w.model_dump(exclude_none=True).items() if k not in drop}
    if r.training:
        workload.update(micro_batch_size=r.batch, sequence_length=r.seq)
        if arch.kind == "encoder-decoder":
            workload["target_length"] = r.target
    else:
        workload.update(batch_size=r.batch, context_length=r.seq, weights_dtype=w.weights_dtype or "bf16")
    if w.dpo is not None and w.task != "dpo":  # a DPO policy's view (core/sizing/preference.py): shown in pairs
        workload.update(task="dpo", micro_batch_size=r.batch // SEQUENCES_PER_PAIR)
        if w.global_batch_size:
            workload["global_batch_size"] = w.global_batch_size // SEQUENCES_PER_PAIR
    if w.grpo is not None and w.task != "grpo":  # a GRPO policy's view (core/sizing/grpo.py): its sequence
        # (prompt + response) and global batch (prompts x group) are the grpo section's, shown as the pass trains them
        workload["task"] = "grpo"
    return workload


def estimate(project: Project, arch: ModelArch, hw: Hardware, gpu: Gpu | None, *, model_name: str, origin: str,
             source: str | None, as_of: datetime.date | None, speed: SpeedModel, table: ActivationTable,
             overheads: Overheads, notes: list[Note], serving: ServingData | None = None) -> EstimateResult:
    """Memory, FLOPs and speed of `project` (its model resolved as `arch`) on `hw` with `gpu` (None: memory and
    FLOPs only). `notes` come first (the catalog's, say). Serving needs `serving` (data/serving.toml): the
    memory as the engine allocates it, and with no layout given on several GPUs the layout plan would pick."""
    w = project.workload
    check_workload(arch, w)
    params = count_params(arch)
    serve = w.task == "inference" and serving is not None
    if serve:  # the project's engine: its defaults in place of vLLM's (engines.serving_for)
        assert serving is not None
        serving = serving_for(serving, w)
    if serve and hw.gpus > 1 and hw.layout == Layout() and gpu is not None:
        assert serving is not None
        usable = serving_usable(int(gpu.memory_gib * GIB), w, serving.engine, project.constraints.memory_headroom)
        lay = serving_layout(arch, params, w, hw.gpus, usable, overheads, serving.engine,
                             int(gpu.memory_gib * GIB))
        if lay != hw.layout:
            hw = Hardware(gpu=hw.gpu, gpus=hw.gpus, layout=lay)
            notes = [*notes, Note(code="serving-layout", message=f"no layout given: tensor parallel {lay.tp}"
                                  + (f", pipeline parallel {lay.pp}" if lay.pp > 1 else "")
                                  + f" on {hw.gpus} GPUs ({hw.gpus // (lay.tp * lay.pp)} replica(s)), the smallest "
                                  "model-parallel group whose replica fits, as plan picks")]
    hw, pool_notes = trainer_pool(hw, w)  # GRPO with separate pools: the trainer's GPUs (core/sizing/grpo_pools.py)
    notes = [*notes, *pool_notes]
    holds = None
    if serve and gpu is not None:  # the engine's share: the requests its KV cache admits, the rest queue
        assert serving is not None
        cap = engine_cap(int(gpu.memory_gib * GIB), w, serving.engine)
        mem, holds = admitted_memory(arch, params, w, hw.layout, hw.gpus, overheads, serving.engine, cap,
                                     gpu_bytes=int(gpu.memory_gib * GIB))
    elif serve:
        assert serving is not None
        mem = estimate_serving_memory(arch, params, w, hw.layout, hw.gpus, overheads, serving.engine)
    else:
        mem = estimate_memory(arch, params, w, hw.layout, hw.gpus, table, overheads)
        mem = with_rollout(mem, arch, params, w, hw.layout, hw.gpus, overheads,
                           serving.engine if serving is not None else None,
                           int(gpu.memory_gib * GIB) if gpu is not None else None)
    notes = [*notes, *mem.notes]
    time = inference = None
    if w.task != "inference":
        compute, time = _training(project, arch, params, mem, hw, gpu, speed, table, notes, serving)
    elif serving is None:
        raise InputError(["workload", "task"], "serving estimates need the serving engine's data "
                         "(gpuplan.catalog.serving.load_serving(), passed as serving=)")
    else:
        compute, inference = _serving(w, arch, params, mem, hw, gpu, speed, notes, serving)
        notes += kv_notes(arch, w, holds, inference)
    gpu_bytes = int(gpu.memory_gib * GIB) if gpu else None
    mem_cap = engine_cap(gpu_bytes, w, serving.engine) if gpu_bytes is not None and serve and serving else gpu_bytes
    out = memory_out(mem, mem_cap)
    if serve:  # both serving figures: every request in flight held at once, and the least the engine starts on
        assert serving is not None
        in_flight = in_flight_requests(arch, w, inference)
        out = out.model_copy(update={
            "in_flight_bytes": in_flight_bytes(arch, params, w, hw.layout, hw.gpus, overheads, serving.engine,
                                               in_flight, gpu_bytes), "in_flight_requests": in_flight,
            "start_bytes": serving_start_bytes(arch, params, w, hw.layout, hw.gpus, overheads, serving.engine,
                                               gpu_bytes)})
    return EstimateResult(
        project=project.name,
        model=ModelInfo(name=model_name, origin=origin, model_type=arch.model_type, parameters=params.total,
                        trainable_parameters=mem.trainable_parameters, active_parameters=params.active, source=source,
                        as_of=as_of),
        workload=shown_workload(arch, w),
        hardware=HardwareInfo(gpu=gpu.id if gpu else None, gpus=hw.gpus, layout=mem.layout, gpu_memory_bytes=gpu_bytes),
        memory=out, compute=compute, time=time, inference=inference, notes=notes,
    )


#: the API's DPO glue (core/sizing/preference.py), re-exported for gpuplan.api
__all__ = ["INFERENCE_KEYS", "TRAINING_KEYS", "check_workload", "estimate", "in_pairs", "policy_noted",
           "shown_workload"]
