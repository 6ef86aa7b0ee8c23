"""The tracer against itself on real tensors, and against numbers that must hold.

Fake vs real: the same step (same code, same tracking mode, same CUDA emulation) on tiny Llama (GQA), GPT-2,
Mixtral, BERT and T5 with FakeTensorMode and with real CPU tensors must give equal peaks, phase peaks,
category splits and KV-cache bytes, to the byte.  Then sanity numbers, SDPA kernel choices, and speed on a
full-size Llama-3-8B config.
"""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("accelerate")

from gpuplan.trace import TraceSpec, trace_memory  # noqa: E402
from tests.conftest import hf_config  # noqa: E402

pytestmark = pytest.mark.trace
transformers.logging.set_verbosity_error()

TINY = {
    "llama": dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=1000),
    "gpt2": dict(model_type="gpt2", n_embd=64, n_layer=2, n_head=4, vocab_size=1000, n_positions=128),
    "mixtral": dict(model_type="mixtral", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, vocab_size=1000, num_local_experts=4,
                    num_experts_per_tok=2),
    "bert": dict(model_type="bert", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, vocab_size=1000),
    "t5": dict(model_type="t5", d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=1000,
               decoder_start_token_id=0),
}
SHAPE = dict(micro_batch_size=2, sequence_length=64, target_length=32, batch_size=2, context_length=64)

CASES = [(m, dict(precision="fp32")) for m in TINY] + [(m, dict(precision="bf16-mixed")) for m in TINY] + [
    ("llama", dict(precision="bf16-mixed", gradient_checkpointing=True)),
    ("gpt2", dict(precision="bf16-mixed", gradient_checkpointing=True)),
    ("t5", dict(precision="fp32", gradient_checkpointing=True)),
    ("llama", dict(task="lora", precision="bf16-mixed")),
    ("llama", dict(task="lora", precision="bf16-mixed", gradient_checkpointing=True)),
    ("mixtral", dict(task="lora", precision="bf16-mixed")),
    ("bert", dict(task="lora", precision="bf16-mixed")),
    ("t5", dict(task="lora", precision="bf16-mixed")),
    ("gpt2", dict(task="lora", precision="fp32")),
    ("llama", dict(precision="bf16", optimizer="adafactor")),
    ("gpt2", dict(precision="fp32", optimizer="sgd", attention="eager")),
    ("llama", dict(task="inference", weights_dtype="bf16")),
    ("gpt2", dict(task="inference", weights_dtype="bf16")),
    ("mixtral", dict(task="inference", weights_dtype="bf16")),
    ("t5", dict(task="inference", weights_dtype="fp32")),
]


def _spec(model: str, **kw) -> TraceSpec:
    return TraceSpec(config=TINY[model], **{**SHAPE, **kw})


@pytest.mark.parametrize(("model", "kw"), CASES, ids=[f"{m}-{'-'.join(map(str, k.values()))}" for m, k in CASES])
def test_fake_equals_real(model: str, kw: dict) -> None:
    spec = _spec(model, **kw)
    fake, real = trace_memory(spec), trace_memory(spec, fake=False)
    assert fake.peak_bytes == real.peak_bytes
    assert fake.phase_peaks == real.phase_peaks
    split = ("parameters_bytes", "gradients_bytes", "optimizer_bytes", "other_bytes", "kv_cache_bytes")
    assert {k: getattr(fake, k) for k in split} == {k: getattr(real, k) for k in split}
    assert (fake.parameters, fake.trainable_parameters) == (real.parameters, real.trainable_parameters)
    assert fake.sdpa_backends == real.sdpa_backends
    assert set(fake.phase_peaks) == ({"prefill"} if kw.get("task") == "inference"
                                     else {"forward", "backward", "optimizer"})
    assert fake.peak_bytes == max(fake.phase_peaks.values())


def test_fp32_adamw_full_finetune_needs_16_bytes_per_parameter() -> None:
    r = trace_memory(_spec("llama", precision="fp32"))
    assert r.peak_bytes >= 16 * r.parameters
    # weights and both AdamW moments are fp32 and live at the peak; 512-B rounding per tensor only adds
    assert r.parameters_bytes >= 4 * r.parameters and r.optimizer_bytes >= 8 * r.trainable_parameters
    assert r.parameters == r.trainable_parameters
    assert sum(r.gib().values()) > 0


def test_lora_trains_only_adapters() -> None:
    r = trace_memory(_spec("llama", task="lora", precision="bf16-mixed"))
    assert 0 < r.trainable_parameters < r.parameters / 10
    assert r.optimizer_bytes <= 3 * 4 * r.trainable_parameters + 512 * 2 * 64  # 2 fp32 moments (+ rounding)


def test_llama3_8b_kv_cache_formula_and_flash_prefill() -> None:
    cfg = hf_config("llama-3-8b")
    r = trace_memory(TraceSpec(config=cfg, task="inference", batch_size=4, context_length=2048, weights_dtype="bf16"))
    layers, kv_heads = cfg["num_hidden_layers"], cfg["num_key_value_heads"]
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    assert r.kv_cache_bytes == 2 * layers * 4 * 2048 * kv_heads * head_dim * 2
    assert r.sdpa_backends == {"flash": layers}
    assert r.peak_bytes >= r.parameters_bytes + r.kv_cache_bytes


def test_sdpa_kernel_choices_follow_cuda_rules() -> None:
    assert trace_memory(_spec("llama", precision="bf16-mixed")).sdpa_backends == {"flash": 4}  # 2 layers x 2 steps
    assert trace_memory(_spec("llama", precision="fp32")).sdpa_backends == {"efficient": 4}  # no fp32 flash
    assert set(trace_memory(_spec("t5", precision="bf16-mixed")).sdpa_backends) == {"efficient"}  # bias mask
    eager = trace_memory(_spec("llama", attention="eager"))
    assert eager.sdpa_backends == {} and eager.attention == "eager"


def test_cpu_path_materialises_what_cuda_kernels_do_not() -> None:
    """BERT trains with attention dropout: CPU SDPA falls back to math (s x s, fp32 dropout masks)."""
    spec = dict(precision="fp32", micro_batch_size=2, sequence_length=256)
    cuda_like = trace_memory(_spec("bert", **spec))
    cpu = trace_memory(_spec("bert", emulate_cuda=False, **spec))
    assert cuda_like.sdpa_backends == {"efficient": 4} and cpu.sdpa_backends == {}
    s_by_s = 2 * 4 * 256 * 256 * 4  # one layer's fp32 (b, h, s, s) scores
    assert cpu.phase_peaks["forward"] - cuda_like.phase_peaks["forward"] >= 2 * s_by_s


def test_llama3_8b_training_trace_is_fast() -> None:
    cfg = hf_config("llama-3-8b")
    t0 = time.perf_counter()
    r = trace_memory(TraceSpec(config=cfg, precision="bf16-mixed", micro_batch_size=1, sequence_length=512))
    seconds = time.perf_counter() - t0
    assert seconds < 60, seconds
    assert r.parameters == 8_030_261_248
    # fp32 weights + grads + 2 AdamW moments + foreach AdamW's sqrt temporary
    assert r.peak_bytes >= 20 * r.parameters
    assert r.sdpa_backends == {"flash": 64}
