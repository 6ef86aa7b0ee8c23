"""Build the Hugging Face model of a TraceSpec (random weights) and the batch it is trained / prefilled on.

Runs under whatever tensor mode is active: inside FakeTensorMode the model costs no memory.  Also holds the
Hugging Face adjustments a fake run needs so that it takes the same path as an eager run (see hf_patches()).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

DECODERS = {
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text",
    "phi", "phi3", "gpt2", "gpt_neox", "falcon", "bloom", "stablelm",
}
SEQ2SEQ = {"t5", "mt5"}
ENCODERS = {"bert", "roberta"}
VISION = {"vit", "resnet"}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def family(model_type: str) -> str:
    for name, types in (("decoder", DECODERS), ("seq2seq", SEQ2SEQ), ("encoder", ENCODERS), ("vision", VISION)):
        if model_type in types:
            return name
    raise ValueError(f"model_type {model_type!r} is not supported by the tracer")


def make_config(config: dict):
    from transformers import AutoConfig

    cfg = dict(config)
    model_type = cfg.pop("model_type", None)
    if model_type is None:
        raise ValueError("config has no model_type")
    for k in ("auto_map", "_name_or_path", "transformers_version", "architectures"):
        cfg.pop(k, None)
    conf = AutoConfig.for_model(model_type, **cfg)
    if model_type in SEQ2SEQ and getattr(conf, "decoder_start_token_id", None) is None:
        conf.decoder_start_token_id = conf.pad_token_id or 0  # T5 starts decoding with the pad token
    return conf


def masked_lm(spec) -> bool:
    """An encoder traced with its masked-LM head: pre-training it (fine-tuning puts a classification head on it,
    whatever the checkpoint's `architectures` says; core/sizing/stack.head_of decides alike)."""
    return spec.task == "pretrain"


def build_model(spec, dtype: torch.dtype):
    """The model in `dtype` (random init; meant to run under FakeTensorMode)."""
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForImageClassification,
        AutoModelForMaskedLM,
        AutoModelForSeq2SeqLM,
        AutoModelForSequenceClassification,
    )

    conf = make_config(spec.config)
    fam = family(conf.model_type)
    auto = {"decoder": AutoModelForCausalLM, "seq2seq": AutoModelForSeq2SeqLM,
            "encoder": AutoModelForSequenceClassification, "vision": AutoModelForImageClassification}[fam]
    if fam == "encoder" and masked_lm(spec):  # pre-training an encoder: the masked-LM head (BertForMaskedLM)
        auto = AutoModelForMaskedLM
    # Built directly in `dtype` (Module.to() cannot swap fake parameters); same tensors as casting after.
    if conf.model_type == "resnet":
        return auto.from_config(conf, dtype=dtype), fam, "none"
    try:
        return auto.from_config(conf, dtype=dtype, attn_implementation=spec.attention), fam, spec.attention
    except ValueError as e:  # e.g. bloom, gemma2: no SDPA path in this transformers -> eager, as HF suggests
        if spec.attention != "sdpa" or "does not support an attention implementation" not in str(e):
            raise
        return auto.from_config(conf, dtype=dtype, attn_implementation="eager"), fam, "eager"


# Used when PEFT's own table (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING) has no entry.
LORA_FALLBACK_TARGETS = {"qwen2_moe": ["q_proj", "v_proj"], "qwen3_moe": ["q_proj", "v_proj"],
                         "phi3": ["qkv_proj"], "vit": ["q_proj", "v_proj"]}


def lora_targets(model_type: str, requested: list[str] | None) -> list[str]:
    """Requested targets, else PEFT's default for the model type, else LORA_FALLBACK_TARGETS."""
    if requested:
        return list(requested)
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as peft_defaults

    targets = peft_defaults.get(model_type) or LORA_FALLBACK_TARGETS.get(model_type)
    if not targets:
        raise ValueError(f"no default LoRA target modules for {model_type!r}: pass lora_targets")
    return list(targets)


def apply_lora(model, spec):
    from peft import LoraConfig, get_peft_model

    targets = lora_targets(model.config.model_type, spec.lora_targets)
    cfg = LoraConfig(r=spec.lora_rank, lora_alpha=spec.lora_alpha, target_modules=targets,
                     lora_dropout=0.0, bias="none")
    return get_peft_model(model, cfg)


def make_inputs(model_config, fam: str, spec, training: bool, pixel_dtype: torch.dtype) -> dict:
    """The batch.  Token ids are random; labels are a copy of input_ids (causal LM), like a data collator."""
    if training:
        b, s = spec.micro_batch_size, spec.sequence_length
    else:
        b, s = spec.batch_size, spec.context_length
    if fam == "vision":
        size = spec.image_size or _image_size(model_config)
        batch = {"pixel_values": torch.randn(b, 3, size, size, dtype=pixel_dtype)}
        if training:
            batch["labels"] = torch.randint(0, _num_labels(model_config), (b,))
        return batch
    vocab = model_config.vocab_size
    ids = torch.randint(0, vocab, (b, s))
    batch = {"input_ids": ids}
    if fam == "decoder":
        if training:
            batch["labels"] = ids.clone()
    elif fam == "seq2seq":
        t = spec.target_length or s
        if training:
            batch["labels"] = torch.randint(0, vocab, (b, t))
        else:
            batch["decoder_input_ids"] = torch.zeros((b, 1), dtype=torch.long)
    elif fam == "encoder" and training and masked_lm(spec):  # every position predicts (a collator's -100s
        batch["labels"] = ids.clone()  # mask some targets, but the head computes the logits of all of them)
    elif fam == "encoder" and training:
        batch["labels"] = torch.randint(0, _num_labels(model_config), (b,))
    return batch


def _image_size(conf) -> int:
    size = getattr(conf, "image_size", None)
    if isinstance(size, (list, tuple)):
        size = size[0]
    return int(size or 224)


def _num_labels(conf) -> int:
    return int(getattr(conf, "num_labels", 2) or 2)


@contextmanager
def fake_build_patches():
    """Make model construction work on fake tensors (used for fake runs, never while tracing).

    * Module.to() on fake parameters tries swap_tensors, which FakeTensorMode's weakrefs forbid: while building
      (PEFT moves / casts its adapters with .to()) parameters are replaced by new Parameter objects instead;
      a memo keeps tied parameters tied.
    * trunc_normal_ reads values (erfinv bounds): replaced by normal_ (same shape, dtype, storage).
    """
    from torch._subclasses.fake_tensor import FakeTensor

    original = torch.nn.Module._apply
    memo: dict[int, torch.nn.Parameter] = {}
    keep: list = []

    def _apply(self, fn, recurse=True):
        if recurse:
            for m in self.children():
                m._apply(fn)
        for key, p in self._parameters.items():
            if p is None:
                continue
            if not isinstance(p, FakeTensor):
                return original(self, fn, recurse=False)
            if id(p) not in memo:
                with torch.no_grad():
                    new = fn(p)
                keep.append(p)
                memo[id(p)] = p if new is p else torch.nn.Parameter(new, requires_grad=p.requires_grad)
            self._parameters[key] = memo[id(p)]
        for key, b in self._buffers.items():
            if b is not None:
                self._buffers[key] = fn(b)
        return self

    def _trunc_normal(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
        with torch.no_grad():
            return tensor.normal_(mean, std)

    original_tn = torch.nn.init._no_grad_trunc_normal_
    torch.nn.Module._apply = _apply
    torch.nn.init._no_grad_trunc_normal_ = _trunc_normal
    try:
        yield
    finally:
        torch.nn.Module._apply = original
        torch.nn.init._no_grad_trunc_normal_ = original_tn


# --------------------------------------------------------------------------- HF adjustments
def _find_packed_sequence_indices(position_ids):
    """As masking_utils.find_packed_sequence_indices in eager mode, for unpacked batches.

    Under fake tensors HF cannot read the values, assumes packing and builds an explicit mask (which would
    push SDPA off its fused kernels).  Our position ids are plain aranges: never packed.  The eager ops are
    still issued so that the temporaries are the same in fake and real runs.
    """
    first = position_ids[:, :1] - 1
    diff = torch.diff(position_ids, prepend=first, dim=-1)
    packed = (diff != 1).cumsum(-1)
    _ = (packed[:, -1] == 0).all()
    return None


def _wrap_mask_skip(fn):
    """`_ignore_*_mask_sdpa` read a 2-D padding mask; our masks are all ones: answer as for None."""
    from torch._subclasses.fake_tensor import is_fake

    def wrapped(padding_mask, *args, **kwargs):
        if padding_mask is not None and is_fake(padding_mask):
            _ = padding_mask.all()
            padding_mask = None
        return fn(padding_mask, *args, **kwargs)

    return wrapped


def _can_use_grouped_mm(input, weight, offs) -> bool:
    """MoE experts: torch's grouped GEMM takes bf16 (as on CUDA); other dtypes use HF's fallback custom op.

    Both allocate only the (tokens*top_k, out) result forward and grad_input + a full grad_weight backward.
    """
    return weight.dtype == torch.bfloat16


@contextmanager
def hf_patches():
    """Patches applied to fake and real runs alike (so both take the same path)."""
    import transformers.integrations.moe as moe
    import transformers.masking_utils as mu

    patches = [(mu, "find_packed_sequence_indices", _find_packed_sequence_indices),
               (moe, "_can_use_grouped_mm", _can_use_grouped_mm)]
    for name in ("_ignore_causal_mask_sdpa", "_ignore_bidirectional_mask_sdpa"):
        if hasattr(mu, name):
            patches.append((mu, name, _wrap_mask_skip(getattr(mu, name))))
    saved = []
    try:
        for mod, name, fn in patches:
            if hasattr(mod, name):
                saved.append((mod, name, getattr(mod, name)))
                setattr(mod, name, fn)
        yield
    finally:
        for mod, name, fn in reversed(saved):
            setattr(mod, name, fn)
