"""What the training stack changes in memory: the model's head by task, how a framework's QLoRA holds its 4-bit
weights (bitsandbytes' MatMul4Bit, LitGPT's Lightning plugin), and the checks that refuse settings no stack runs.
Pure.

Sources (read in the projects' code; docs/project.md lists them with each framework's defaults):

* bitsandbytes `autograd/_functions.py` MatMul4Bit.forward: up to 0.43.1 it kept `ctx.tensors = (A, B)`, the
  layer's input as a plain attribute of the autograd node, which autograd never releases until the graph itself is
  freed; 0.43.2 (PR #1270, "fix QLoRA mem bug: delete useless buffered activation", 2024-07-16) keeps `(None, B)`.
  Forward and backward each dequantize the whole weight: `F.dequantize_4bit(B, quant_state).to(A.dtype)`, in the
  dtype it was quantized from, then cast to the compute dtype when the two differ.
* Lightning Fabric `plugins/precision/bitsandbytes.py` (the QLoRA path of LitGPT): `bnb.nf4` is NF4 *without* double
  quantization (`compress_statistics=False`; `nf4-dq` has it), every `torch.nn.Linear` is replaced, the LM head
  included, and weights are quantized from fp16 (`weight.to(device, dtype=torch.half)`) while the compute dtype is
  bf16 under `bf16-true`: two 16-bit copies of a weight per 4-bit matmul.
* LitGPT `finetune/lora.py` (2024-04, bitsandbytes==0.42.0 pinned in pyproject.toml): `loss` and `logits` of a step
  stay referenced until the next step's forward has run, so with the old bitsandbytes the previous step's graph
  (and every 4-bit layer input it keeps) lives through the next forward; LitGPT's model has its own `lm_head`
  even where the Hugging Face checkpoint ties it to the embedding (scripts/convert_hf_checkpoint.py copies it).
* transformers' bitsandbytes integration keeps the output embedding (lm_head) unquantized
  (`get_keys_to_not_convert`); QLoRA recipes set `bnb_4bit_use_double_quant=True` (QLoRA paper, section 3).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.core.sizing.activations import compute_bytes
from gpuplan.core.sizing.levels import round_block
from gpuplan.core.sizing.params import ParamCount
from gpuplan.errors import InputError
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Layout, Workload

#: NF4: 4 bits + an fp32 absmax per 64 weights; with double quantization the absmax are 8-bit with an fp32 scale per
#: 256 of them (QLoRA paper, Dettmers et al. 2023, section 3)
NF4_BYTES_PER_PARAM = 0.5 + 1 / 64 + 4 / (64 * 256)
NF4_NO_DQ_BYTES_PER_PARAM = 0.5 + 4 / 64
#: heads that end in vocabulary-sized logits and a cross-entropy over them
LM_HEADS = frozenset({"causal-lm", "masked-lm", "seq2seq-lm"})


@dataclass(frozen=True)
class QloraImpl:
    """How a QLoRA stack holds its 4-bit base model."""

    #: bytes per quantized parameter (NF4, with or without double quantization)
    bytes_per_param: float = NF4_BYTES_PER_PARAM
    #: the LM head is quantized too (LitGPT replaces every Linear); transformers keeps it in 16 bits
    quantize_head: bool = False
    #: the model keeps an LM head of its own beside a tied embedding (LitGPT)
    separate_head: bool = False
    #: 16-bit copies of one weight alive during a 4-bit matmul: 1 (quantized from the compute dtype) or 2
    #: (quantized from fp16, computed in bf16: the dequantized weight and its cast)
    dequant_copies: int = 1
    #: bitsandbytes < 0.43.2: MatMul4Bit keeps each 4-bit layer's input until the graph is freed
    keeps_inputs: bool = False
    #: the training loop keeps the last step's loss and logits (so its graph) through the next forward (LitGPT)
    keeps_last_graph: bool = False


LITGPT_QLORA = QloraImpl(bytes_per_param=NF4_NO_DQ_BYTES_PER_PARAM, quantize_head=True, separate_head=True,
                         dequant_copies=2, keeps_last_graph=True)


def qlora_impl(w: Workload, bnb_keeps_inputs: bool = False) -> QloraImpl:
    """The QLoRA implementation of `w.framework` (transformers + PEFT + bitsandbytes unless LitGPT);
    `bnb_keeps_inputs`: bitsandbytes older than 0.43.2 (what a run before July 2024 used)."""
    base = LITGPT_QLORA if w.framework == "litgpt" else QloraImpl()
    if bnb_keeps_inputs:
        return QloraImpl(base.bytes_per_param, base.quantize_head, base.separate_head, base.dequant_copies, True,
                         base.keeps_last_graph)
    return base


def head_of(arch: ModelArch, w: Workload) -> str:
    """The model's task head: config.json's `architectures` when it names one (a masked-LM class only when
    pre-training: hub encoders list BertForMaskedLM, and fine-tuning puts a classification head on them), else
    the kind's: a causal LM (decoders), masked-LM for pre-training an encoder and sequence classification for
    fine-tuning one, seq2seq LM, image classification (ViT, CNN)."""
    if arch.head is not None and not (arch.head == "masked-lm" and w.task != "pretrain"):
        return arch.head  # a hub checkpoint's pre-training class (BertForMaskedLM) is not its fine-tuning head
    if arch.kind == "decoder":
        return "causal-lm"
    if arch.kind == "encoder":
        return "masked-lm" if w.task == "pretrain" else "sequence-classification"
    if arch.kind == "encoder-decoder":
        return "seq2seq-lm"
    return "image-classification"


def retained_input_elements(arch: ModelArch, w: Workload) -> tuple[float, float]:
    """Elements per token and layer of the 4-bit layers' inputs MatMul4Bit keeps (bitsandbytes < 0.43.2): (the
    ones nothing else saves in this step's graph, all of them). Inputs shared by several linears (q/k/v; gate and
    up; a parallel block's attention and MLP) count once; the attention output is the SDPA output the attention
    saves anyway; an input LoRA adapts is saved by the adapter already."""
    h, q, i = arch.hidden_size, arch.q_dim, arch.intermediate_size
    if arch.moe is not None:
        i = max(i, arch.moe.expert_intermediate_size * arch.moe.experts_per_token + arch.moe.shared_intermediate_size)
    shared_norm = arch.parallel_residual and arch.norms_per_layer == 1
    targets = set((w.lora.targets if w.lora else None) or ["all-linear"])
    every = "all-linear" in targets
    mlp_in = 0.0 if shared_norm else h
    allk = h + q + mlp_in + i
    adapted_mlp = every or bool(targets & {"gate_proj", "up_proj", "fc1", "c_fc", "dense_h_to_4h", "wi", "wi_0"})
    adapted_down = every or bool(targets & {"down_proj", "fc2", "dense_4h_to_h", "wo", "c_proj"})
    new = (0.0 if adapted_mlp else mlp_in) + (0.0 if adapted_down else i)
    return new, allk


#: serving weight dtypes loaded from a quantized checkpoint or quantized on load
QUANTIZED_SERVING = ("int4", "int8", "fp8", "nvfp4", "mxfp4")


def load_peak_bytes(arch: ModelArch, p: ParamCount, w: Workload, lay: Layout, weights: int) -> int:
    """The tensor peak of loading the checkpoint onto one GPU: the weights as they end up, plus the tensor being
    loaded. transformers and LitGPT load one checkpoint tensor at a time; quantizing (QLoRA, int4/int8/fp8 serving)
    reads it in 16 bits onto the GPU first (LitGPT: `weight.to(device, dtype=torch.half)`, then
    `bnb.functional.quantize_4bit`), so the largest tensor's 16-bit copy comes on top of the quantized weights."""
    quantized = w.task == "qlora" or (w.task == "inference" and (w.weights_dtype or "bf16") in QUANTIZED_SERVING)
    if not quantized:
        return weights
    head = arch.vocab_size * arch.hidden_size if (w.task == "qlora" and qlora_impl(w).quantize_head
                                                  and head_of(arch, w) == "causal-lm") else 0
    largest = max(p.largest_linear_weight, head)
    return weights + round_block(2 * largest / (lay.tp * lay.pp))


def qlora_terms(arch: ModelArch, p: ParamCount, w: Workload, tp: int, impl: QloraImpl) -> tuple[float, float]:
    """(bytes per token, over all layers, of the 4-bit layers' inputs an old bitsandbytes keeps beyond what the
    activations hold; the 16-bit dequantized copies of the largest 4-bit weight during its matmul)."""
    if w.task != "qlora":
        return 0.0, 0.0
    quantized_head = impl.quantize_head and head_of(arch, w) == "causal-lm"
    largest = max(p.largest_linear_weight, arch.vocab_size * arch.hidden_size if quantized_head else 0)
    dequant = impl.dequant_copies * 2 * largest / tp
    retained = 0.0
    if impl.keeps_inputs and not w.gradient_checkpointing:  # reentrant checkpointing drops the nodes in forward
        new, every = retained_input_elements(arch, w)
        layers = arch.num_layers + arch.num_decoder_layers
        retained = layers * compute_bytes(w) * (new + (every if impl.keeps_last_graph else 0.0)) / tp
    return retained, dequant


def fused_activation_saving(arch: ModelArch, w: Workload, tp: int) -> float:
    """Bytes per token and layer a framework's own model saves less than the Hugging Face implementation the
    activation coefficients are measured on: LitGPT computes phi's tanh-GELU with one fused
    `F.gelu(approximate="tanh")` (litgpt/model.py, config gelu_approximate="tanh"), which keeps only its input;
    transformers' `gelu_new` (NewGELUActivation) is a composite of elementwise ops that keeps 3 more tensors of the
    MLP's width (counted with saved_tensors_hooks: 4 against 1)."""
    if w.framework == "litgpt" and arch.activation == "gelu_new":
        return 3 * arch.intermediate_size * compute_bytes(w) / tp
    return 0.0


def check_stack(arch: ModelArch, w: Workload) -> None:
    """Settings no stack runs: InputError naming the field."""
    training = w.task != "inference"
    for key in ("activation_offload", "optimizer_in_backward", "packing"):
        if not training and getattr(w, key):
            raise InputError(["workload", key], f"applies to training, not task {w.task}", "false or unset")
    if w.loss == "chunked":
        head = head_of(arch, w)
        if head not in LM_HEADS:
            raise InputError(["workload", "loss"], f"chunked cross-entropy splits a vocabulary-sized LM head; this "
                             f"{arch.model_type} model has a {head} head", "standard")
        if not training:
            raise InputError(["workload", "loss"], "a loss applies to training, not inference", "unset")


__all__ = ["LITGPT_QLORA", "LM_HEADS", "NF4_BYTES_PER_PARAM", "NF4_NO_DQ_BYTES_PER_PARAM", "QloraImpl", "check_stack",
           "fused_activation_saving", "head_of", "load_peak_bytes", "qlora_impl", "qlora_terms",
           "retained_input_elements"]
