"""Speculative decoding (workload.speculative, issue #29): what a verification step emits per request and what the
draft costs, from the mechanism. Each engine step drafts k tokens per decoding request (k forward passes of the
draft: an EAGLE-3 head, the model's MTP modules, a separate draft model; an n-gram lookup costs nothing on the GPU),
then the target runs the k + 1 tokens of every request in one forward pass: its linear layers see k + 1 tokens per
request (free while the step is bound by reading the weights, paid in full once it is compute-bound), its attention
reads each request's KV cache once for the k + 1 queries. The step emits `accepted` tokens per request on average
(1 + the accepted drafts), so a request needs (output - 1) / accepted decode steps. Nothing is fitted: at low batch
the step costs about what a plain decode step costs and the speed-up is near `accepted`; at high batch the target's
matmuls are compute-bound and the k + 1 tokens cost k + 1 times as much, so speculation helps less or not at all.
Pure."""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.core.sizing.params import ParamCount, _attention, _mlp, _norm, mtp_params
from gpuplan.errors import InputError
from gpuplan.schema.model import ModelArch
from gpuplan.schema.project import Workload
from gpuplan.schema.serving import EngineDefaults
from gpuplan.schema.speculative import Speculative


@dataclass(frozen=True, slots=True)
class Draft:
    """A speculation as the engine runs it: tokens drafted per step, tokens a step emits per request, and the draft's
    parameters (weights read per draft pass; of which MoE expert weights), its FLOPs per token (2 x active
    parameters) and its decoder layers (KV cache: one layer's per token, each)."""

    method: str
    k: int
    accepted: float
    params: int
    expert_params: int
    active_params: int
    layers: int


def accepted_tokens(k: int, rate: float) -> float:
    """Tokens a verification step emits per request when each of the k drafted tokens is accepted with chance
    `rate` given the ones before it were: 1 + rate + ... + rate^k, the target's own token included."""
    return sum(rate ** i for i in range(k + 1))


def draft_of(arch: ModelArch, p: ParamCount, w: Workload, engine: EngineDefaults) -> Draft | None:
    """The project's speculation (None: off). InputError when it cannot run on the model, or lacks what has no
    published default (the draft tokens of an EAGLE-3 head, n-gram or draft model; their acceptance)."""
    spec = w.speculative
    if spec is None:
        return None
    where = ["workload", "speculative"]
    if arch.kind != "decoder":
        raise InputError(where, f"speculative decoding drafts tokens of a decoder; the model is {arch.kind}")
    if spec.method == "mtp" and not arch.mtp_layers:
        raise InputError([*where, "method"], f"the model ({arch.model_type}) has no multi-token prediction modules "
                         "(num_nextn_predict_layers)", "eagle3, ngram, draft")
    k = spec.draft_tokens or (arch.mtp_layers if spec.method == "mtp" else None)
    if k is None:
        raise InputError([*where, "draft_tokens"], f"method {spec.method} needs the tokens drafted per step (vLLM's "
                         "num_speculative_tokens, SGLang's speculative_num_draft_tokens): no default is assumed")
    accepted = _acceptance(spec, k, engine)
    params, experts, active, layers = _draft_params(arch, p, spec)
    return Draft(method=spec.method, k=k, accepted=accepted, params=params, expert_params=experts,
                 active_params=active, layers=layers)


def _acceptance(spec: Speculative, k: int, engine: EngineDefaults) -> float:
    if spec.acceptance_length is not None:
        if spec.acceptance_length > k + 1:
            raise InputError(["workload", "speculative", "acceptance_length"], f"{spec.acceptance_length:g} tokens per "
                             f"step is more than {k} drafted tokens and the target's own can give ({k + 1})")
        return spec.acceptance_length
    rate = spec.acceptance_rate
    if rate is None and spec.method == "mtp":
        rate = engine.mtp_acceptance_rate
    if rate is None:
        raise InputError(["workload", "speculative", "acceptance_rate"], f"method {spec.method}: no published "
                         "acceptance is assumed for it (it depends on the model, the draft and the traffic); give "
                         "acceptance_length (tokens per step, as vLLM and SGLang report it) or acceptance_rate",
                         "acceptance_length, acceptance_rate")
    return accepted_tokens(k, rate)


def _draft_params(arch: ModelArch, p: ParamCount, spec: Speculative) -> tuple[int, int, int, int]:
    """(draft parameters, of which MoE expert weights, active per token, decoder layers)."""
    if spec.method == "ngram":
        return 0, 0, 0, 0
    if spec.method == "draft":
        n = spec.draft_parameters or 0
        return n, 0, n, 0  # a separate model: its weights; its KV cache is not counted (its shape is not given)
    h = arch.hidden_size
    if spec.method == "mtp":
        n = mtp_params(arch)
        experts = 0
        if arch.moe is not None:
            per_expert = _mlp(arch, arch.moe.expert_intermediate_size)[1]
            experts = arch.mtp_layers * arch.moe.num_experts * per_expert
            active = n - experts + arch.mtp_layers * arch.moe.experts_per_token * per_expert
        else:
            active = n
        return n, experts, active, arch.mtp_layers
    # EAGLE-3: one decoder layer of the target's shape whose attention takes the token's embedding beside the fused
    # features (2h in to q, k and v), the fusion of three target layers' features (3h -> h) and its own head over a
    # reduced vocabulary; the embedding is the target's (SpecForge configs/llama3-8B-eagle3.json: one layer,
    # draft_vocab_size 32000; SGLang / vLLM LlamaForCausalLMEagle3)
    attn, _, _ = _attention(arch)
    mlp = _mlp(arch, arch.intermediate_size)[0]
    extra_in = h * (arch.q_dim + 2 * arch.kv_dim)
    n = attn + extra_in + mlp + (arch.norms_per_layer + 2) * _norm(arch, h) + 3 * h * h + h * EAGLE3_DRAFT_VOCAB
    return n, 0, n, 1


#: EAGLE-3 heads predict over a reduced vocabulary: 32,000 tokens in SpecForge's Llama 3 config
#: (sgl-project/SpecForge configs/llama3-8B-eagle3.json, "draft_vocab_size": 32000) and the public Llama 3.1 8B
#: EAGLE-3 checkpoints trained with it
EAGLE3_DRAFT_VOCAB = 32000


def draft_weight_bytes(d: Draft, weight_bytes: float) -> float:
    """Bytes of the draft's weights, in the target's weights dtype."""
    return d.params * weight_bytes


__all__ = ["EAGLE3_DRAFT_VOCAB", "Draft", "accepted_tokens", "draft_of", "draft_weight_bytes"]
