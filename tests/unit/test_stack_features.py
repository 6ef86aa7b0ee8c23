"""The training-stack features of issue 15 in the memory estimate: chunked loss, activation offloading, optimizer
step in backward, paged 8-bit AdamW, compile, QLoRA as bitsandbytes and LitGPT hold it, the task head, the
loading peak; and the inputs no stack runs, refused with the field named."""

from __future__ import annotations

import pytest

from gpuplan.catalog.config_reader import head_from_architectures
from gpuplan.catalog.loader import load_activation_table, load_overheads, resolve_model
from gpuplan.core.sizing.layout_memory import Allocator
from gpuplan.core.sizing.levels import memory_out
from gpuplan.core.sizing.memory import estimate_memory, layout_memory
from gpuplan.core.sizing.params import count_params
from gpuplan.core.sizing.stack import (
    LITGPT_QLORA,
    NF4_NO_DQ_BYTES_PER_PARAM,
    QloraImpl,
    head_of,
    qlora_impl,
    retained_input_elements,
)
from gpuplan.errors import InputError
from gpuplan.schema.project import Layout, ModelRef, Workload
from gpuplan.units import GB, GIB

TABLE, OH = load_activation_table(), load_overheads()


def _arch(preset: str):
    return resolve_model(ModelRef(preset=preset)).arch


def _mem(preset: str, qlora: QloraImpl | None = None, **workload):
    arch = _arch(preset)
    return estimate_memory(arch, count_params(arch), Workload(**workload), Layout(), 1, TABLE, OH, qlora)


LLAMA = {"task": "full-finetune", "precision": "bf16", "micro_batch_size": 2, "sequence_length": 4096}


def test_chunked_loss_drops_the_fp32_logit_copies() -> None:
    std, chunked = _mem("llama-3.2-3b", **LLAMA), _mem("llama-3.2-3b", loss="chunked", **LLAMA)
    tokens, vocab = 2 * 4096, 128256
    # backward through the standard loss holds two fp32 logit-sized gradients; chunks hold 1/8 of them at a time
    assert std.peak_phase == chunked.peak_phase == "backward"
    gap = std.peak_tensor_bytes - chunked.peak_tensor_bytes
    assert gap == pytest.approx(tokens * vocab * 2 * 4 * 7 / 8, rel=0.01)


def test_compiled_chunked_loss_keeps_only_16_bit_logits() -> None:
    eager = _mem("llama-3.2-3b", loss="chunked", gradient_checkpointing=True, **LLAMA)
    compiled = _mem("llama-3.2-3b", loss="chunked", gradient_checkpointing=True, compile=True, **LLAMA)
    assert compiled.peak_tensor_bytes < eager.peak_tensor_bytes


def test_activation_offload_keeps_two_layers_on_the_gpu() -> None:
    base = dict(gradient_checkpointing=True, loss="chunked", **LLAMA)
    on, off = _mem("llama-3.2-3b", activation_offload=True, **base), _mem("llama-3.2-3b", **base)
    layer_inputs = 2 * 4096 * 3072 * 2  # one layer's bf16 input per checkpointed layer
    gap = off.phase_peaks_bytes["forward"] - on.phase_peaks_bytes["forward"]
    assert gap == pytest.approx((28 - 2) * layer_inputs, rel=0.05)


def test_optimizer_in_backward_frees_the_gradients() -> None:
    base = dict(gradient_checkpointing=True, loss="chunked", **LLAMA)
    plain, fused = _mem("llama-3.2-3b", **base), _mem("llama-3.2-3b", optimizer_in_backward=True, **base)
    assert fused.peak_tensor_bytes < plain.peak_tensor_bytes
    assert max(fused.breakdown.gradients_bytes, 0) < 1 * GIB  # one parameter's gradient at a time


def test_optimizer_in_backward_cannot_free_accumulated_gradients() -> None:
    base = dict(gradient_checkpointing=True, loss="chunked", global_batch_size=8, **LLAMA)
    plain, fused = _mem("llama-3.2-3b", **base), _mem("llama-3.2-3b", optimizer_in_backward=True, **base)
    assert fused.breakdown.gradients_bytes == plain.breakdown.gradients_bytes > 5 * GIB


def test_paged_8bit_states_are_outside_the_peak_with_a_note() -> None:
    m = _mem("llama-3.1-8b", optimizer="paged-adamw-8bit", gradient_checkpointing=True, **{
        k: v for k, v in LLAMA.items() if k != "sequence_length"}, sequence_length=2048)
    assert m.breakdown.optimizer_bytes == 0
    note = next(n for n in m.notes if n.code == "paged-optimizer")
    assert "unified memory" in note.message
    # torchtune README: Llama 3.1 8B full fine-tune (PagedAdamW8bit, optimizer in backward, checkpointing, packed
    # 2 x 2048, compile) peaks at 18.9 GiB on one RTX 4090: the weights are 15 GiB of it
    tt = _mem("llama-3.1-8b", optimizer="paged-adamw-8bit", optimizer_in_backward=True, gradient_checkpointing=True,
              loss="chunked", compile=True, task="full-finetune", precision="bf16", micro_batch_size=2,
              sequence_length=2048)
    assert tt.peak_tensor_bytes / GIB == pytest.approx(18.9, rel=0.15)


def test_litgpt_qlora_with_bitsandbytes_0_42_matches_the_published_peak() -> None:
    # LitGPT config_hub/finetune README (2024-04, bitsandbytes 0.42.0): llama-2-7b/qlora.yaml, 1x A10G, 13.68 GB
    w = {"task": "qlora", "precision": "bf16", "micro_batch_size": 2, "sequence_length": 512, "framework": "litgpt",
             "loss": "chunked", "lora": {"rank": 32, "alpha": 16, "targets": ["q_proj", "v_proj"]}}
    old = _mem("llama-2-7b", qlora=qlora_impl(Workload(**w), bnb_keeps_inputs=True), **w)
    assert old.peak_tensor_bytes / GB == pytest.approx(13.68, rel=0.10)
    # bitsandbytes >= 0.43.2 no longer keeps the inputs: about 2.5 GB less
    new = _mem("llama-2-7b", **w)
    assert 1.5 * GB < old.peak_tensor_bytes - new.peak_tensor_bytes < 3.5 * GB


def test_litgpt_quantizes_the_head_without_double_quantization() -> None:
    w = Workload(task="qlora", framework="litgpt", precision="bf16")
    assert qlora_impl(w) == LITGPT_QLORA and LITGPT_QLORA.bytes_per_param == NF4_NO_DQ_BYTES_PER_PARAM
    hf = _mem("llama-2-7b", task="qlora", precision="bf16")
    lit = _mem("llama-2-7b", task="qlora", precision="bf16", framework="litgpt")
    head = 32000 * 4096
    linear = count_params(_arch("llama-2-7b")).block_linear_weights
    expected = linear * (NF4_NO_DQ_BYTES_PER_PARAM - 0.5159) - head * (2 - NF4_NO_DQ_BYTES_PER_PARAM)
    assert lit.breakdown.weights_bytes - hf.breakdown.weights_bytes == pytest.approx(expected, rel=0.02)


def test_retained_inputs_count_shared_inputs_once() -> None:
    llama, falcon = _arch("llama-2-7b"), _arch("falcon-7b")
    qv = Workload(task="qlora", lora={"targets": ["q_proj", "v_proj"]})
    new, every = retained_input_elements(llama, qv)
    assert (new, every) == (4096 + 11008, 4096 * 3 + 11008)
    _, falcon_every = retained_input_elements(falcon, Workload(task="qlora"))
    assert falcon_every == 4544 * 2 + 4 * 4544  # one shared norm: attention and MLP read the same input


def test_load_peak_is_reported_and_counted_in_fits() -> None:
    m = _mem("llama-3.1-8b", task="qlora", precision="bf16", micro_batch_size=1, sequence_length=512)
    assert m.breakdown.weights_bytes < m.load_peak_bytes < m.peak_tensor_bytes
    assert m.load_device_bytes > m.load_peak_bytes
    out = memory_out(m, m.load_device_bytes - 1)  # room for the step's tensors? no: not even for the load
    assert out.fits is False and out.load_peak_bytes == m.load_peak_bytes
    inference = _mem("llama-3.1-8b", task="inference", weights_dtype="int4", batch_size=1, context_length=1024)
    assert inference.load_peak_bytes > inference.breakdown.weights_bytes  # a 16-bit tensor is read, then quantized


def test_training_terms_equal_the_estimate_with_the_features() -> None:
    arch = _arch("llama-3.2-1b")
    p = count_params(arch)
    for extra in ({"loss": "chunked"}, {"activation_offload": True, "gradient_checkpointing": True},
                  {"optimizer_in_backward": True}, {"optimizer": "paged-adamw-8bit"}, {"compile": True},
                  {"task": "qlora", "framework": "litgpt"}):
        w = Workload(**{**LLAMA, **extra})
        m = estimate_memory(arch, p, w, Layout(), 1, TABLE, OH)
        mem = layout_memory(arch, p, w, Layout(), 1, TABLE, Allocator.of(OH))
        assert mem.device_bytes(2, 1) == m.device_bytes
        assert mem.load_device_bytes(arch, p, w, OH) == m.load_device_bytes


def test_heads_follow_architectures_and_task() -> None:
    assert head_from_architectures({"architectures": ["BertForMaskedLM"]}) == "masked-lm"
    assert head_from_architectures({"architectures": ["LlamaForSequenceClassification"]}) == "sequence-classification"
    assert head_from_architectures({"architectures": ["T5ForConditionalGeneration"]}) == "seq2seq-lm"
    assert head_from_architectures({}) is None and head_from_architectures({"architectures": ["BertModel"]}) is None
    with pytest.raises(InputError, match="architectures"):
        head_from_architectures({"architectures": "BertForMaskedLM"})
    bert = _arch("bert-base-uncased")
    assert head_of(bert, Workload(task="pretrain")) == "masked-lm"
    assert head_of(bert, Workload(task="full-finetune")) == "sequence-classification"
    mlm = bert.model_copy(update={"head": "masked-lm"})  # a hub checkpoint's class: the head when pre-training
    assert head_of(mlm, Workload(task="pretrain")) == "masked-lm"
    assert head_of(mlm, Workload(task="full-finetune")) == "sequence-classification"
    llama_cls = _arch("llama-3.2-1b").model_copy(update={"head": "sequence-classification"})
    assert head_of(llama_cls, Workload(task="full-finetune")) == "sequence-classification"


def test_masked_lm_pretraining_counts_the_vocabulary_logits() -> None:
    w = {"precision": "bf16-mixed", "micro_batch_size": 32, "sequence_length": 512}
    mlm = _mem("bert-base-uncased", task="pretrain", **w)
    cls = _mem("bert-base-uncased", task="full-finetune", **w)
    logits = 32 * 512 * 30522
    assert mlm.peak_tensor_bytes - cls.peak_tensor_bytes > logits * 4  # at least the fp32 log-softmax


@pytest.mark.parametrize("workload,field", [
    ({"task": "inference", "activation_offload": True}, "activation_offload"),
    ({"task": "inference", "optimizer_in_backward": True}, "optimizer_in_backward"),
    ({"task": "full-finetune", "loss": "chunked"}, "loss"),  # bert fine-tuning: a classification head
])
def test_stacks_no_one_runs_are_refused(workload, field) -> None:
    with pytest.raises(InputError) as err:
        _mem("bert-base-uncased", **workload)
    assert err.value.loc == ("workload", field)
