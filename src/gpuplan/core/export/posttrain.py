"""Post-training configurations for a plan's candidate (issue #31): `--to trl` writes a TRL config file (GRPOConfig
for task grpo, DPOConfig for task dpo, with the ModelConfig/ScriptArguments keys the `trl grpo` / `trl dpo` CLI
reads from the same YAML), `--to verl` the Hydra overrides of verl's `main_ppo` (ppo_trainer.yaml) for a GRPO run.
Pure: text in, text out.

What the plan sized maps onto each framework's own keys (their documented names and meanings):
- TRL (trl/trainer/grpo_config.py, dpo_config.py; transformers TrainingArguments): per_device_train_batch_size and
  gradient_accumulation_steps from the candidate's micro-batch and data-parallel ranks (GRPO: sequences, a prompt
  and one completion; DPO: pairs); GRPO's num_generations (group_size), max_completion_length,
  beta (0.0 with kl off: TRL then loads no reference), use_vllm with vllm_mode colocate or server,
  vllm_gpu_memory_utilization and vllm_tensor_parallel_size; DPO's max_length and precompute_ref_log_probs; ZeRO
  through a DeepSpeed config (`--to deepspeed`), LoRA through use_peft / lora_r / lora_alpha.
- verl (verl/trainer/config/ppo_trainer.yaml and its rollout/actor/data parts): data.train_batch_size (prompts per
  step), data.max_prompt_length / max_response_length, actor_rollout_ref.rollout.n (group), its
  gpu_memory_utilization and tensor_model_parallel_size, actor.ppo_mini_batch_size (the whole batch: one optimizer
  step per step, as gpuplan times it), ppo_micro_batch_size_per_gpu, use_kl_loss, enable_gradient_checkpointing,
  algorithm.adv_estimator grpo, trainer.nnodes / n_gpus_per_node; the hybrid engine (colocated) only: separate
  pools are verl's one-step-off or fully async recipes, whose schedules gpuplan does not time.
"""

from __future__ import annotations

from typing import Any

from gpuplan.core.export.common import Shape, comment, export_hint, layout_line, origin, to_yaml
from gpuplan.errors import InputError
from gpuplan.schema.plan import Candidate
from gpuplan.schema.project import DpoSpec, GrpoSpec, Project

MODEL = "MODEL_ID_OR_PATH"
#: GRPO's KL coefficient with kl on: DeepSeekMath's (arXiv:2402.03300, section 4.1, "the KL coefficient is 0.04")
KL_BETA = 0.04
DATA = "DATASET_NAME_OR_PATH"


def _model_keys(p: Project) -> dict[str, Any]:
    keys: dict[str, Any] = {"model_name_or_path": MODEL, "dataset_name": DATA, "output_dir": f"out/{p.name}"}
    lora = p.workload.lora
    if lora is not None:
        keys.update(use_peft=True, lora_r=lora.rank, lora_alpha=lora.alpha,
                    lora_target_modules=lora.targets if lora.targets != ["all-linear"] else "all-linear")
    return keys


def _precision(p: Project) -> dict[str, Any]:
    prec = p.workload.precision
    if prec in ("bf16-mixed", "bf16"):
        return {"bf16": True}
    if prec == "fp16-mixed":
        return {"fp16": True}
    return {}


def render_trl(p: Project, c: Candidate, s: Shape, index: int) -> str:
    """A TRL config YAML (`trl grpo --config FILE` / `trl dpo --config FILE`, or `TrlParser`), as planned."""
    w = p.workload
    if w.task not in ("grpo", "dpo"):
        raise InputError(["--to"], f"--to trl writes a GRPO or DPO config; project {p.name!r} is task {w.task}",
                         "accelerate, deepspeed, torchrun, skypilot")
    cfg = _model_keys(p)
    cfg.update(per_device_train_batch_size=s.micro, gradient_accumulation_steps=s.accum,
               gradient_checkpointing=s.ckpt, **_precision(p))
    if w.epochs:
        cfg["num_train_epochs"] = w.epochs
    notes = [origin(p, c, index), layout_line(p, s)]
    if w.task == "grpo":
        g = w.grpo or GrpoSpec()
        if (s.micro * s.dp * s.accum) % g.group_size:
            raise InputError(["workload", "grpo", "group_size"], f"TRL needs the sequences of a step "
                             f"({s.micro * s.dp * s.accum}) to be a multiple of num_generations ({g.group_size})",
                             "a group size dividing the step's sequences")
        cfg.update(num_generations=g.group_size, max_completion_length=g.response_length,
                   beta=KL_BETA if g.kl else 0.0, use_vllm=True,
                   vllm_mode="colocate" if g.placement == "colocated" else "server")
        if g.placement == "colocated":
            cfg.update(vllm_gpu_memory_utilization=g.gpu_memory_utilization or 0.5,
                       vllm_tensor_parallel_size=g.rollout_tp or 1, vllm_enable_sleep_mode=True)
            notes.append("Colocated as planned: vLLM takes vllm_gpu_memory_utilization of each GPU and sleeps through "
                         "training (vllm_enable_sleep_mode), as gpuplan sized it.")
        else:
            notes.append(f"Server mode as planned: run `trl vllm-serve --model {MODEL} --tensor_parallel_size "
                         f"{g.rollout_tp or 1}` on the engine's {g.rollout_gpus or '?'} GPU(s), this config on the "
                         "trainer's.")
        notes.append(f"Prompts as planned: up to {g.prompt_length:,} tokens (TRL 1.x has no prompt cap in GRPOConfig: "
                     "keep the dataset's prompts within it).")
        if g.kl:
            notes.append(f"kl: beta {KL_BETA} (DeepSeekMath's KL coefficient; TRL's default 0.0 loads no reference, "
                         "and the plan holds one): set your own.")
    else:
        d = w.dpo or DpoSpec()
        cfg.update(max_length=w.sequence_length or 1024, precompute_ref_log_probs=d.reference == "precomputed")
    if s.zero:
        notes.append(f"ZeRO-{s.zero} as planned: add deepspeed: ds_config.json ({export_hint('deepspeed', index)}).")
    notes.append(f"Launch: accelerate launch --num_processes {s.gpus} -m trl.cli {w.task} --config THIS_FILE "
                 f"(or trl {w.task} --config THIS_FILE).")
    return comment(notes) + to_yaml(cfg)


def render_verl(p: Project, c: Candidate, s: Shape, index: int) -> str:
    """verl's main_ppo overrides for a colocated GRPO run (python -m verl.trainer.main_ppo --config-name ...)."""
    w = p.workload
    if w.task != "grpo":
        raise InputError(["--to"], f"--to verl writes a GRPO run; project {p.name!r} is task {w.task}",
                         "trl (dpo), accelerate, deepspeed, torchrun, skypilot")
    g = w.grpo or GrpoSpec()
    if g.placement != "colocated":
        raise InputError(["--to"], "--to verl writes verl's hybrid engine (colocated); separate pools are its "
                         "one-step-off and fully async recipes, whose overlapped schedules gpuplan does not time",
                         "trl (server mode), or placement: colocated")
    if s.gpus % s.per_server and s.servers > 1:
        raise InputError(["--candidate"], "verl places whole nodes: every server must hold the same GPUs")
    micro = max(s.micro, 1)
    cfg: dict[str, Any] = {
        "algorithm": {"adv_estimator": "grpo", "use_kl_in_reward": False},
        "data": {"train_files": DATA, "train_batch_size": g.prompts_per_step, "max_prompt_length": g.prompt_length,
                 "max_response_length": g.response_length},
        "actor_rollout_ref": {
            "model": {"path": MODEL, "enable_gradient_checkpointing": s.ckpt},
            "actor": {"strategy": "fsdp", "ppo_mini_batch_size": g.prompts_per_step,
                      "ppo_micro_batch_size_per_gpu": micro, "use_kl_loss": g.kl,
                      "fsdp_config": {"param_offload": s.offload == "params",
                                      "optimizer_offload": s.offload in ("optimizer", "params")}},
            "rollout": {"name": "vllm", "n": g.group_size,
                        "gpu_memory_utilization": g.gpu_memory_utilization or 0.5,
                        "tensor_model_parallel_size": g.rollout_tp or s.tp * s.pp,
                        "log_prob_micro_batch_size_per_gpu": micro},
            "ref": {"log_prob_micro_batch_size_per_gpu": micro},
        },
        "trainer": {"nnodes": s.servers, "n_gpus_per_node": s.per_server,
                    "total_epochs": max(round(w.epochs or 1), 1),
                    "logger": ["console"]},
    }
    if w.lora is not None:
        cfg["actor_rollout_ref"]["model"].update(lora_rank=w.lora.rank, lora_alpha=w.lora.alpha,
                                                 target_modules=w.lora.targets[0] if w.lora.targets == ["all-linear"]
                                                 else w.lora.targets)
    notes = [origin(p, c, index), layout_line(p, s),
             "verl shards the actor with FSDP (ZeRO-3 in gpuplan's terms) whatever the planned ZeRO stage; the plan's "
             "tensor x pipeline group is the rollout's tensor parallelism unless grpo.rollout_tp is given.",
             "Run: python -m verl.trainer.main_ppo --config-path DIR --config-name THIS_FILE_WITHOUT_.yaml "
             "(it overrides ppo_trainer.yaml: add `defaults: [ppo_trainer, _self_]` or pass the keys as "
             "key=value overrides)."]
    if s.servers > 1:
        notes.append(f"{s.servers} nodes: start a Ray cluster over them first (ray start --head / --address).")
    return comment(notes) + to_yaml(cfg)


__all__ = ["DATA", "KL_BETA", "MODEL", "render_trl", "render_verl"]
