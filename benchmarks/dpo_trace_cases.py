"""DPO steps traced (issue #31): the policy on the chosen and rejected sequences together, with a frozen reference
(a bf16 copy for a full fine-tune, the base with adapters disabled for LoRA) or a precomputed one, as TRL's
DPOTrainer runs them (gpuplan.trace TraceSpec.dpo). Each is estimated as its policy's workload
(core/sizing/preference.py) and traced exactly: tests/trace/test_dpo_trace.py holds them within 12%."""

from __future__ import annotations

from trace_cases import _config
from trace_validation import Case


def dpo_cases() -> list[Case]:
    llama = _config("llama-3-8b", 4)
    return [
        Case(name="dpo llama3-8b/4L full amp b1 s512", config=llama, dpo="model"),
        Case(name="dpo llama3-8b/4L full amp b2 s2048", config=llama, dpo="model", micro_batch_size=2,
             sequence_length=2048),
        Case(name="dpo llama3-8b/4L full amp b2 s1024 ckpt", config=llama, dpo="model", micro_batch_size=2,
             sequence_length=1024, gradient_checkpointing=True),
        Case(name="dpo llama3-8b/4L full precomputed amp b1 s512", config=llama, dpo="precomputed"),
        Case(name="dpo llama3-8b/4L full bf16 b2 s1024", config=llama, dpo="model", precision="bf16",
             micro_batch_size=2, sequence_length=1024),
        Case(name="dpo llama3-8b/4L lora all amp b2 s1024", config=llama, dpo="model", task="lora",
             micro_batch_size=2, sequence_length=1024),
        Case(name="dpo llama3-8b/4L lora q,v amp b1 s2048 ckpt", config=llama, dpo="model", task="lora",
             sequence_length=2048, gradient_checkpointing=True, lora_targets=["q_proj", "v_proj"]),
        Case(name="dpo mistral-7b/4L full amp b2 s2048", config=_config("mistral-7b", 4), dpo="model",
             micro_batch_size=2, sequence_length=2048),
        Case(name="dpo qwen2.5-72b/2L lora all amp b2 s1024", config=_config("qwen2.5-72b", 2), dpo="model",
             task="lora", micro_batch_size=2, sequence_length=1024),
    ]
