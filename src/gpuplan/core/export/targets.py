"""Launch configurations that realise one candidate of a plan: an Accelerate config, a DeepSpeed config, a
torchrun command line or a SkyPilot task. Pure: text in, text out; the CLI writes the file.

Every output starts with where it came from (project, candidate, hardware, layout) and what to edit. What a
launcher cannot express is refused with an InputError that says which target can, rather than emitted wrong:
- Accelerate has no pipeline parallelism; it runs tensor parallelism only through FSDP2 (or alone);
- DeepSpeed's pipeline engine takes ZeRO stage 0 or 1 only;
- accelerate, deepspeed and torchrun are training launchers; an inference candidate exports to SkyPilot as a
  SkyServe service running vLLM with the planned tensor parallelism and replicas.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Literal, get_args

from gpuplan.errors import InputError
from gpuplan.schema.plan import Candidate
from gpuplan.schema.project import Project
from gpuplan.units import GIB

Target = Literal["accelerate", "deepspeed", "torchrun", "skypilot"]
TARGETS: tuple[str, ...] = get_args(Target)
FILENAMES = {"accelerate": "accelerate_config.yaml", "deepspeed": "ds_config.json", "torchrun": "torchrun.sh",
             "skypilot": "skypilot.yaml"}

#: catalog GPU id -> SkyPilot accelerator name, as `sky show-gpus -a` lists them (SkyPilot docs,
#: docs/source/compute/show-gpus-all.txt, 2025). GPUs not here get a guessed name and a comment to check it.
SKYPILOT_ACCELERATORS = {
    "v100-sxm2-16gb": "V100", "v100-sxm2-32gb": "V100-32GB", "v100-pcie-32gb": "V100-32GB", "t4-16gb": "T4",
    "a10-24gb": "A10", "a10g-24gb": "A10G", "a40-48gb": "A40", "a100-pcie-40gb": "A100", "a100-sxm-40gb": "A100",
    "a100-pcie-80gb": "A100-80GB", "a100-sxm-80gb": "A100-80GB", "rtx-a6000-48gb": "RTXA6000",
    "rtx-3090-24gb": "RTX3090", "l4-24gb": "L4", "l40-48gb": "L40", "l40s-48gb": "L40S",
    "rtx-6000-ada-48gb": "RTX6000-Ada", "rtx-4090-24gb": "RTX4090", "rtx-5090-32gb": "RTX5090",
    "h100-pcie-80gb": "H100", "h100-sxm-80gb": "H100", "h100-nvl-94gb": "H100-NVL", "h200-sxm-141gb": "H200",
    "b200-180gb": "B200", "mi300x-192gb": "MI300X",
}
#: catalog GPUs that run ROCm builds (vLLM, PyTorch) rather than CUDA ones
ROCM_GPUS = frozenset({"mi250x-128gb", "mi300x-192gb", "mi325x-256gb"})
#: Accelerate's mixed_precision for each workload.precision (pure bf16: the model itself is bf16)
ACCELERATE_PRECISION = {"fp32": "no", "fp16-mixed": "fp16", "bf16-mixed": "bf16", "bf16": "no", "fp8-mixed": "fp8"}
#: the rendezvous port every launcher uses (torchrun's default)
PORT = 29500
HEAD = "HEAD_NODE_IP"


@dataclass(frozen=True)
class _Shape:
    """The candidate's numbers, read once."""

    servers: int
    per_server: int
    zero: int
    tp: int
    pp: int
    dp: int
    offload: str
    ckpt: bool
    micro: int
    global_batch: int
    accum: int

    @property
    def gpus(self) -> int:
        return self.servers * self.per_server


def _shape(c: Candidate) -> _Shape:
    lay = c.layout
    n = c.servers * c.gpus_per_server
    tp, pp = lay.tp, lay.pp
    dp = lay.dp if lay.dp is not None else n // (tp * pp)
    micro = lay.micro_batch_size or 1
    gbs = lay.global_batch_size or micro * dp
    if gbs % (micro * dp):
        raise InputError(["candidate", "layout"], f"global batch {gbs} is not a multiple of micro-batch {micro} x "
                         f"data parallel {dp}")
    return _Shape(servers=c.servers, per_server=c.gpus_per_server, zero=lay.zero, tp=tp, pp=pp, dp=dp,
                  offload=lay.offload, ckpt=bool(lay.gradient_checkpointing),
                  micro=micro, global_batch=gbs, accum=gbs // (micro * dp))


def export(project: Project, candidate: Candidate, target: str, *, index: int = 0,
           model_id: str | None = None) -> tuple[str, str]:
    """(suggested file name, text) of the `target` launcher for `candidate` (number `index` in the plan).
    `model_id` (a Hugging Face id) names the model a served candidate loads."""
    if target not in TARGETS:
        raise InputError(["--to"], f"unknown target {target!r}", ", ".join(TARGETS))
    if project.workload.task == "inference":
        if target != "skypilot":
            raise InputError(["--to"], f"project {project.name!r} serves a model (workload.task: inference) and "
                             f"--to {target} writes a training launcher", "skypilot (a SkyServe service running "
                             "vLLM with the planned tensor parallelism and replicas)")
        return FILENAMES[target], _skyserve(project, candidate, index, model_id)
    s = _shape(candidate)
    render = {"accelerate": _accelerate, "deepspeed": _deepspeed, "torchrun": _torchrun, "skypilot": _skypilot}
    return FILENAMES[target], render[target](project, candidate, s, index)


# ---------------------------------------------------------------------------------------------------- headers

def _origin(p: Project, c: Candidate, index: int) -> str:
    return (f"Generated by gpuplan for project {p.name!r}, candidate {index}: {c.servers} server(s) x "
            f"{c.gpus_per_server} x {c.gpu_id} ({c.gpu_name}), {c.servers * c.gpus_per_server} GPUs.")


def _layout_line(p: Project, s: _Shape) -> str:
    return (f"Layout: ZeRO-{s.zero}{'' if s.offload == 'none' else f' (offload {s.offload} to CPU)'}, tensor "
            f"parallel {s.tp}, pipeline parallel {s.pp}, data parallel {s.dp}; micro-batch {s.micro} x {s.accum} "
            f"accumulation step(s) x {s.dp} = global batch {s.global_batch}; gradient checkpointing "
            f"{'on' if s.ckpt else 'off'}; precision {p.workload.precision}; task {p.workload.task}.")


def _server_line(c: Candidate) -> str:
    sv = c.server
    return (f"Each server as planned: {sv.cpu_cores} CPU cores, {sv.ram_bytes / GIB:,.0f} GiB RAM, "
            f"{sv.network_gbit_s:g} Gbit/s network.")


def _comment(lines: list[str]) -> str:
    """Comment lines, each wrapped at 100 columns (continuations indented)."""
    out = []
    for ln in lines:
        wrapped = textwrap.wrap(ln, 98, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
        out += [f"# {w}\n" for w in wrapped or [""]]
    return "".join(out)


def _export_hint(target: str, index: int) -> str:
    return f"gpuplan export PROJECT --to {target}" + (f" --candidate {index}" if index else "") + \
        f" --out {FILENAMES[target]}"


# ---------------------------------------------------------------------------------------------------- accelerate

def _accelerate(p: Project, c: Candidate, s: _Shape, index: int) -> str:
    if s.pp > 1:
        raise InputError(["--candidate"], f"candidate {index} uses pipeline parallelism (pp={s.pp}), which Accelerate "
                         "cannot express (it has no pipeline engine). To fix: --to deepspeed or --to torchrun with a "
                         "pipeline-capable script (DeepSpeed PipelineModule, Megatron-LM, torchtitan), or export a "
                         "candidate without pipeline parallelism")
    precision = p.workload.precision
    cfg: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "debug": False}
    notes: list[str] = []
    fsdp = {"fsdp_version": 2, "fsdp_reshard_after_forward": s.zero == 3, "fsdp_offload_params": s.offload != "none",
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_activation_checkpointing": s.ckpt}
    if s.tp > 1:
        cfg["distributed_type"] = "FSDP" if s.dp > 1 else "MULTI_GPU"
        if s.dp > 1:
            cfg["fsdp_config"] = fsdp
        cfg["parallelism_config"] = {"parallelism_config_dp_replicate_size": 1,
                                     "parallelism_config_dp_shard_size": s.dp, "parallelism_config_tp_size": s.tp,
                                     "parallelism_config_cp_size": 1}
        notes.append(f"Tensor parallel {s.tp}: load the model with from_pretrained(..., tp_plan=\"auto\"); "
                     "Accelerate checks that its tensor-parallel size matches.")
        if s.dp > 1 and s.zero < 3:
            notes.append(f"Accelerate composes tensor parallelism with FSDP2 only: the plan's ZeRO-{s.zero} over "
                         f"{s.dp} data-parallel ranks runs as FSDP2 sharding that keeps parameters gathered between "
                         "forward and backward (reshard_after_forward: false); it uses no more memory than planned.")
    elif s.gpus == 1:
        cfg["distributed_type"] = "NO"
    elif s.zero == 3 and s.offload == "none":
        cfg["distributed_type"] = "FSDP"
        cfg["fsdp_config"] = fsdp
        notes.append("ZeRO-3 runs as FSDP2 FULL_SHARD (reshard_after_forward: true).")
    elif s.zero >= 1:
        cfg["distributed_type"] = "DEEPSPEED"
        ds: dict[str, Any] = {"zero_stage": s.zero, "gradient_accumulation_steps": s.accum, "gradient_clipping": 1.0,
                              "offload_optimizer_device": "cpu" if s.offload != "none" else "none",
                              "offload_param_device": "cpu" if s.offload == "params" else "none",
                              "zero3_init_flag": s.zero == 3}
        if s.zero == 3:
            ds["zero3_save_16bit_model"] = True
        if s.servers > 1:
            ds["deepspeed_multinode_launcher"] = "standard"  # torchrun on every server, no pdsh/hostfile
        cfg["deepspeed_config"] = ds
        if precision == "bf16":
            notes.append("Pure bf16: Accelerate's DeepSpeed keeps fp32 master weights, more optimizer memory than "
                         "planned; for bf16 master weights and optimizer states replace deepspeed_config's keys with "
                         "deepspeed_config_file: ds_config.json (" + _export_hint("deepspeed", index) + ").")
    else:
        cfg["distributed_type"] = "MULTI_GPU"
    cfg["downcast_bf16"] = "no"
    cfg["gpu_ids"] = "all"
    cfg["machine_rank"] = 0
    if s.servers > 1:
        cfg["main_process_ip"] = HEAD
        cfg["main_process_port"] = PORT
    cfg["main_training_function"] = "main"
    mixed = "bf16" if precision == "bf16" and cfg["distributed_type"] == "DEEPSPEED" else ACCELERATE_PRECISION[precision]
    cfg["mixed_precision"] = mixed
    if mixed == "fp8":
        cfg["fp8_config"] = {"backend": "TE", "fp8_format": "HYBRID"}
        notes.append("fp8 needs Transformer Engine installed (fp8_config.backend TE; torchao: AO).")
    cfg["num_machines"] = s.servers
    cfg["num_processes"] = s.gpus
    cfg["rdzv_backend"] = "static"
    cfg["same_network"] = True
    cfg["use_cpu"] = False
    if precision == "bf16" and mixed == "no":
        notes.append("Pure bf16 as planned: load the model with torch_dtype=torch.bfloat16 (mixed_precision: no).")
    if s.ckpt and "fsdp_config" not in cfg:
        notes.append("Gradient checkpointing: call model.gradient_checkpointing_enable() in the script.")
    if p.workload.task == "qlora" and ("fsdp_config" in cfg or s.zero == 3):
        notes.append("QLoRA with sharding: load the 4-bit model with bnb_4bit_quant_storage=torch.bfloat16.")
    batch = f"DataLoader batch_size={s.micro} per process"
    if cfg["distributed_type"] != "DEEPSPEED":
        batch += f", Accelerator(gradient_accumulation_steps={s.accum})"
    edit = [f"Run: accelerate launch --config_file {FILENAMES['accelerate']} train.py (your script; {batch})."]
    if s.servers > 1:
        edit.append(f"Copy this file to each of the {s.servers} servers; set machine_rank to 0..{s.servers - 1} "
                    f"(0 on the server whose address replaces {HEAD}).")
    header = [_origin(p, c, index), _layout_line(p, s), _server_line(c), *edit, *notes]
    return _comment(header) + _yaml(cfg)


# ---------------------------------------------------------------------------------------------------- deepspeed

def _deepspeed_config(p: Project, c: Candidate, s: _Shape, index: int) -> dict[str, Any]:
    if s.pp > 1 and s.zero >= 2:
        raise InputError(["--candidate"], f"candidate {index} combines pipeline parallelism (pp={s.pp}) with ZeRO-"
                         f"{s.zero}; DeepSpeed's pipeline engine takes ZeRO stage 0 or 1 only. To fix: --to torchrun "
                         "with a Megatron-LM or torchtitan script, or export another candidate")
    precision = p.workload.precision
    notes = ["Batch sizes and ZeRO come from the plan; gradient_clipping 1.0 is a common default, not planned."]
    zero: dict[str, Any] = {"stage": s.zero}
    if s.zero:
        zero.update(overlap_comm=True, contiguous_gradients=True)
    if s.offload != "none":
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if s.offload == "params":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    if s.zero == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    cfg: dict[str, Any] = {
        "_gpuplan": {},
        "train_batch_size": s.global_batch,
        "train_micro_batch_size_per_gpu": s.micro,
        "gradient_accumulation_steps": s.accum,
        "gradient_clipping": 1.0,
        "steps_per_print": 100,
        "zero_optimization": zero,
    }
    if precision == "fp16-mixed":
        cfg["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    elif precision in ("bf16-mixed", "fp8-mixed"):
        cfg["bf16"] = {"enabled": True}
    elif precision == "bf16":
        cfg["bf16"] = {"enabled": True}
        if s.zero:
            cfg["bf16"].update(bf16_master_weights_and_grads=True, bf16_optimizer_states=True)
        else:
            notes.append("Pure bf16 at ZeRO-0: DeepSpeed keeps fp32 master weights (bf16 master weights need ZeRO "
                         "1-3), more memory than planned.")
    if precision == "fp8-mixed":
        notes.append("fp8: the fp8 matmuls come from Transformer Engine or torchao layers in the model; DeepSpeed "
                     "runs bf16 around them.")
    if s.ckpt:
        cfg["activation_checkpointing"] = {"partition_activations": False, "cpu_checkpointing": False,
                                           "contiguous_memory_optimization": False,
                                           "synchronize_checkpoint_boundary": False}
        notes.append("Gradient checkpointing: Hugging Face models turn it on with "
                     "model.gradient_checkpointing_enable(); activation_checkpointing configures "
                     "deepspeed.checkpointing for models that call it.")
    if s.tp > 1 and s.pp == 1:
        cfg["tensor_parallel"] = {"autotp_size": s.tp}
        notes.append(f"Tensor parallel {s.tp} through DeepSpeed AutoTP training (a recent DeepSpeed; ZeRO-3 with "
                     "AutoTP needs the newest).")
    if s.tp > 1 or s.pp > 1:
        notes.append(f"train_batch_size counts the {s.dp} data-parallel ranks, as DeepSpeed does with model "
                     f"parallelism; the Hugging Face Trainer counts all {s.gpus} processes and reports a mismatch: "
                     "delete train_batch_size (DeepSpeed derives it) when you launch through the Trainer.")
    if s.pp > 1:
        cfg["pipeline"] = {"stages": s.pp, "partition": "parameters",
                           "activation_checkpoint_interval": 1 if s.ckpt else 0}
        notes.append(f"Pipeline parallel {s.pp}: build the model as deepspeed.pipe.PipelineModule(layers, "
                     f"num_stages={s.pp}); the pipeline section only seeds it.")
        if s.tp > 1:
            notes.append(f"Tensor parallel {s.tp} inside pipeline stages: DeepSpeed runs 3-D parallelism through "
                         "Megatron-DeepSpeed (its mpu and PipeModelDataParallelTopology); AutoTP is not set here.")
    cfg["wall_clock_breakdown"] = False
    cfg["_gpuplan"] = {
        "generated_by": _origin(p, c, index), "layout": _layout_line(p, s), "server": _server_line(c),
        "edit": f"pass this file to deepspeed.initialize(config=...) or to the Hugging Face Trainer "
                f"(--deepspeed {FILENAMES['deepspeed']}); launch with deepspeed or torchrun "
                f"({s.servers} x {s.per_server} processes); optimizer {p.workload.optimizer} and learning rate "
                "come from your script",
        "notes": notes,
    }
    return cfg


def _deepspeed(p: Project, c: Candidate, s: _Shape, index: int) -> str:
    return json.dumps(_deepspeed_config(p, c, s, index), indent=2) + "\n"


# ---------------------------------------------------------------------------------------------------- torchrun

def _script_args(p: Project, s: _Shape) -> list[str]:
    """The training script's arguments, in Hugging Face Trainer's names (TrainingArguments)."""
    args = ["--per_device_train_batch_size", str(s.micro), "--gradient_accumulation_steps", str(s.accum)]
    prec = p.workload.precision
    if prec in ("bf16-mixed", "bf16", "fp8-mixed"):
        args.append("--bf16")
    elif prec == "fp16-mixed":
        args.append("--fp16")
    if s.ckpt:
        args.append("--gradient_checkpointing")
    if s.zero or s.tp > 1 or s.pp > 1:
        args += ["--deepspeed", FILENAMES["deepspeed"]]
    return args


def _script_notes(p: Project, s: _Shape, index: int, where: str = "") -> list[str]:
    notes = ["The arguments after train.py are Hugging Face Trainer's (TrainingArguments): rename them for "
             "your own script."]
    parts = [f"ZeRO-{s.zero}"] * bool(s.zero) + [f"tensor parallel {s.tp}"] * (s.tp > 1) + \
        [f"pipeline parallel {s.pp}"] * (s.pp > 1)
    if parts:
        joined = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
        notes.append(f"{joined} come{'s' * (len(parts) == 1)} from {FILENAMES['deepspeed']}{where}: write it "
                     f"with `{_export_hint('deepspeed', index)}`.")
    if s.pp > 1:
        notes.append("The Trainer has no pipeline parallelism: the script must build the stages (DeepSpeed "
                     "PipelineModule, Megatron-LM, torchtitan).")
    if p.workload.precision == "bf16":
        notes.append("Pure bf16 as planned: load the model with torch_dtype=torch.bfloat16.")
    return notes


def _threads(c: Candidate) -> int:
    return max(1, c.server.cpu_cores // c.gpus_per_server)


def _torchrun(p: Project, c: Candidate, s: _Shape, index: int) -> str:
    if s.servers == 1:
        launch = ["--standalone", "--nnodes=1", f"--nproc-per-node={s.per_server}"]
        where = ["Run it on the server."]
    else:
        launch = [f"--nnodes={s.servers}", f"--nproc-per-node={s.per_server}", "--rdzv-backend=c10d",
                  f'--rdzv-endpoint="${{{HEAD}:?set to the address of server 0}}:{PORT}"',
                  f"--rdzv-id={_slug(p.name)}"]
        where = [f"Run this same script on each of the {s.servers} servers, with {HEAD} set to the address of "
                 "one of them (server 0)."]
    header = [_origin(p, c, index), _layout_line(p, s), _server_line(c),
              "Edit: train.py and its arguments (extra arguments to this script are passed on).", *where,
              *_script_notes(p, s, index)]
    cmd = _continued(["torchrun", *launch, "train.py", *_script_args(p, s), '"$@"'])
    return (f"#!/usr/bin/env bash\n{_comment(header)}set -euo pipefail\n"
            f"export OMP_NUM_THREADS={_threads(c)}  # {c.server.cpu_cores} CPU cores / {s.per_server} processes\n"
            f"{cmd}\n")


def _continued(words: list[str], indent: str = "  ") -> str:
    """A command over several lines: the launcher's options one per line, the script and its arguments last."""
    script = words.index("train.py")
    lines = [words[0], *words[1:script], " ".join(words[script:])]
    return (" \\\n" + indent).join(lines)


# ---------------------------------------------------------------------------------------------------- skypilot

def _accelerator(c: Candidate) -> tuple[str, list[str]]:
    name = SKYPILOT_ACCELERATORS.get(c.gpu_id)
    if name:
        return f"{name}:{c.gpus_per_server}", []
    guess = re.sub(r"-\d+gb$", "", c.gpu_id).upper()  # SkyPilot's style: H100-NVL, RTX6000-Ada, MI300X
    return f"{guess}:{c.gpus_per_server}", [f"NOTE: gpuplan knows no SkyPilot name for {c.gpu_id}; {guess} is a "
                                             "guess: check it with `sky show-gpus -a`."]


def _skypilot(p: Project, c: Candidate, s: _Shape, index: int) -> str:
    acc, warn = _accelerator(c)
    resources: dict[str, Any] = {"accelerators": acc}
    disk = []
    if c.storage_need_bytes > 256e9:  # SkyPilot's default disk is 256 GB
        resources["disk_size"] = int(math.ceil(c.storage_need_bytes / 100e9) * 100)
        disk.append(f"disk_size holds the dataset and the kept checkpoints ({c.storage_need_bytes / 1e9:,.0f} GB as "
                    "planned) on every node; with the data in a bucket (file_mounts) it can shrink.")
    if s.offload != "none":
        resources["memory"] = f"{c.server.ram_bytes // GIB}+"
    if s.servers == 1:
        launch = ["--standalone", "--nnodes=1", "--nproc-per-node=$SKYPILOT_NUM_GPUS_PER_NODE"]
        head = ""
    else:
        launch = ["--nnodes=$SKYPILOT_NUM_NODES", "--nproc-per-node=$SKYPILOT_NUM_GPUS_PER_NODE",
                  "--node-rank=$SKYPILOT_NODE_RANK", f"--master-addr=${HEAD}", f"--master-port={PORT}"]
        head = f'{HEAD}=$(echo "$SKYPILOT_NODE_IPS" | head -n1)\n'
    run = (f"export OMP_NUM_THREADS={_threads(c)}\n{head}"
           + _continued(["torchrun", *launch, "train.py", *_script_args(p, s)]) + "\n")
    task = {"name": _slug(p.name), "resources": resources, "num_nodes": s.servers, "workdir": ".",
            "setup": "pip install -r requirements.txt\n", "run": run}
    header = [_origin(p, c, index), _layout_line(p, s), _server_line(c), *warn,
              "Edit: workdir (your code, with requirements.txt), setup, and train.py and its arguments in run.",
              *_script_notes(p, s, index, " in the workdir"), *disk, f"Launch: sky launch -c {_slug(p.name)} {FILENAMES['skypilot']}"]
    return _comment(header) + _yaml(task)


def _skyserve(p: Project, c: Candidate, index: int, model_id: str | None) -> str:
    w, lay = p.workload, c.layout
    tp = lay.tp
    per_server = c.gpus_per_server // tp
    acc, warn = _accelerator(c)
    args = ['"$MODEL_ID"', "--port", "8000", "--tensor-parallel-size", str(tp)]
    if per_server > 1:
        args += ["--data-parallel-size", str(per_server)]
    if lay.batch_per_replica is not None:
        args += ["--max-num-seqs", str(lay.batch_per_replica)]
    if w.context_length:
        args += ["--max-model-len", str(w.context_length + (w.output_tokens or 0))]
    if w.prefill_tokens:
        args += ["--max-num-batched-tokens", str(w.prefill_tokens)]
    dtype = w.weights_dtype or "bf16"
    notes = []
    if dtype in ("bf16", "fp16", "fp32"):
        args += ["--dtype", {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}[dtype]]
    elif dtype == "fp8":
        args += ["--quantization", "fp8"]
    else:
        notes.append(f"{dtype} weights: set MODEL_ID to a {dtype}-quantized checkpoint (AWQ, GPTQ).")
    if w.kv_cache_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    if c.gpu_id in ROCM_GPUS:
        notes.append("AMD GPUs: install vLLM's ROCm build (setup) or run from a ROCm vLLM image.")
    task = {"name": _slug(p.name), "envs": {"MODEL_ID": model_id},
            "resources": {"accelerators": acc, "ports": 8000},
            "service": {"readiness_probe": "/v1/models", "replicas": c.servers},
            "setup": "pip install vllm\n", "run": "vllm serve " + " ".join(args) + "\n"}
    replicas = lay.replicas if lay.replicas is not None else c.servers * per_server
    header = [_origin(p, c, index),
              f"Serving layout: tensor parallel {tp}, {replicas} replica(s) ({per_server} per server, vLLM data "
              f"parallel), up to {lay.batch_per_replica if lay.batch_per_replica is not None else w.batch_size} concurrent sequences each.",
              _server_line(c), *warn,
              "Edit: MODEL_ID (" + ("none known: pass it with --env MODEL_ID=..." if model_id is None else
                                    "the project's model on the Hugging Face Hub; --env MODEL_ID=... overrides it") +
              "); setup (data parallel needs a recent vLLM).", *notes,
              f"Launch: sky serve up -n {_slug(p.name)} {FILENAMES['skypilot']}"]
    return _comment(header) + _yaml(task)


# ---------------------------------------------------------------------------------------------------- helpers

def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpuplan"


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    text = str(v)
    plain = re.fullmatch(r"[A-Za-z_/][\w./-]*", text) and text.lower() not in ("yes", "no", "on", "off", "true",
                                                                              "false", "null", "y", "n", "~")
    return text if plain else json.dumps(text)


def _yaml(d: dict[str, Any], indent: int = 0) -> str:
    """Block YAML for nested dicts of scalars; multi-line strings as literal blocks."""
    out = []
    pad = " " * indent
    for k, v in d.items():
        if isinstance(v, dict):
            out.append(f"{pad}{k}:\n{_yaml(v, indent + 2)}" if v else f"{pad}{k}: {{}}\n")
        elif isinstance(v, str) and "\n" in v:
            body = "".join(f"{pad}  {ln}\n" if ln else "\n" for ln in v.rstrip("\n").split("\n"))
            out.append(f"{pad}{k}: |\n{body}")
        else:
            out.append(f"{pad}{k}: {_scalar(v)}\n")
    return "".join(out)


__all__ = ["FILENAMES", "SKYPILOT_ACCELERATORS", "TARGETS", "Target", "export"]
