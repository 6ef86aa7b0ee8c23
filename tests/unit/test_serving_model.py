"""The serving model's pieces: the engine facts and their loader (data/serving.toml), the objectives and lengths a
project's keys and use case give, the tensor-parallel all-reduce, memory as the engine allocates it, the layout
estimate picks for serving, and bad input."""

from __future__ import annotations

import pytest

from gpuplan import api
from gpuplan.catalog.hardware import builtin_catalog
from gpuplan.catalog.hf_config import arch_from_hf_config
from gpuplan.catalog.loader import load_overheads, load_presets, load_speed_model
from gpuplan.catalog.serving import load_serving, parse_serving
from gpuplan.core.sizing.engine_memory import estimate_serving_memory, serving_layout
from gpuplan.core.sizing.params import count_params
from gpuplan.core.sizing.serving import lengths, objectives, step_cost
from gpuplan.core.sizing.tp_comm import all_reduce
from gpuplan.errors import CatalogError, InputError
from gpuplan.schema.project import Layout, Slo, Workload
from gpuplan.units import GIB

SD = load_serving()
SM = load_speed_model()
GPUS = builtin_catalog().gpus.rows
L70 = arch_from_hf_config(load_presets()["llama-3.1-70b"].config)


def test_engine_defaults_are_vllms() -> None:
    e = SD.engine
    assert (e.gpu_memory_utilization, e.block_size_tokens) == (0.9, 16)
    assert (e.max_num_batched_tokens_large, e.max_num_batched_tokens_small) == (8192, 2048)
    assert set(SD.use_cases) == {"chat", "rag", "code-completion", "summarization", "batch"}
    for case in SD.use_cases.values():
        assert case.source and case.as_of and case.percentile == 95


def test_a_bad_row_names_the_file_and_field() -> None:
    text = "schema_version = 1\n[[param]]\nid = 'block_size_tokens'\nvalue = -1\nsource = 'x'\nas_of = 2026-01-01\n"
    with pytest.raises(CatalogError):
        parse_serving(text, "mine.toml")


def test_objectives_slo_over_use_case_over_target() -> None:
    w = Workload(task="inference", use_case="chat")
    o = objectives(w, SD)
    assert (o.ttft_s, o.itl_s, o.e2e_s, o.percentile, o.origin) == (0.15, 0.025, 7.0, 95, "use_case")
    w = Workload(task="inference", use_case="chat", slo=Slo(ttft_s=0.5, percentile=99))
    o = objectives(w, SD)
    assert (o.ttft_s, o.itl_s, o.percentile, o.origin) == (0.5, 0.025, 99, "slo")
    o = objectives(Workload(task="inference", target_latency_s=30), SD)
    assert (o.e2e_s, o.percentile, o.origin) == (30, 90, "target_latency_s")


def test_lengths_from_the_use_case_unless_given() -> None:
    assert lengths(L70, Workload(task="inference", use_case="rag"), SD) == (4096, 512)
    assert lengths(L70, Workload(task="inference", use_case="rag", context_length=100), SD) == (100, 512)


def test_tp_decode_all_reduce_is_microseconds_on_nvlink() -> None:
    h100 = GPUS["h100-sxm-80gb"]
    ar = all_reduce(h100, SM, SD, 4, 8)
    assert ar.kind == "nvlink"
    one = ar.seconds(8192 * 2)  # one token of a 70B's hidden state
    assert 5e-6 < one < 15e-6
    # 160 all-reduces per decoding step of a 70B at batch 1: about 1.4 ms (the old guess: 12.8 ms)
    c = step_cost(L70, count_params(L70), Workload(task="inference"), Layout(tp=4), h100, SM, SD, 8)
    assert c.allreduces == 160
    assert 1e-3 < c.allreduces * ar.seconds(8192 * 2) < 2.5e-3
    assert all_reduce(GPUS["l40s-48gb"], SM, SD, 4, 8).kind == "pcie"


def test_kv_read_per_query_head_multiplies_gqa_kv_traffic_only() -> None:
    """An engine without a grouped-query decode kernel (TensorRT-LLM before XQA) reads a KV head once per query head
    of its group: 8x the KV traffic of Llama 3.1 70B (64 query, 8 KV heads) at tp 2, 4 and 8; none for a model
    whose heads are all KV heads; the weights and matmuls do not change."""
    per_head = SD.model_copy(update={"engine": SD.engine.model_copy(update={"kv_read_per_query_head": True})})
    h100, w = GPUS["h100-sxm-80gb"], Workload(task="inference")
    for tp in (2, 4, 8):
        a = step_cost(L70, count_params(L70), w, Layout(tp=tp), h100, SM, SD, 8)
        b = step_cost(L70, count_params(L70), w, Layout(tp=tp), h100, SM, per_head, 8)
        assert b.kv_s_per_token == pytest.approx(8 * a.kv_s_per_token)
        assert (b.weights_s, b.decode_flop_s) == (a.weights_s, a.decode_flop_s)
    mha = arch_from_hf_config(load_presets()["llama-2-7b"].config)
    assert mha.num_heads == mha.num_kv_heads
    a = step_cost(mha, count_params(mha), w, Layout(tp=1), h100, SM, SD, 8)
    b = step_cost(mha, count_params(mha), w, Layout(tp=1), h100, SM, per_head, 8)
    assert b.kv_s_per_token == pytest.approx(a.kv_s_per_token)


def test_kv_cache_is_prompt_and_output_in_blocks() -> None:
    p = count_params(L70)
    w = Workload(task="inference", batch_size=2, context_length=1000, output_tokens=100)
    m = estimate_serving_memory(L70, p, w, Layout(tp=4), 4, load_overheads(), SD.engine)
    per_token = 80 * 2 * 8 * 128 * 2 / 4
    assert m.breakdown.kv_cache_bytes == pytest.approx(2 * 1104 * per_token, abs=4096)  # 1100 -> 69 blocks


def test_fit_layout_chooses_tensor_parallelism_for_serving() -> None:
    p = count_params(L70)
    w = Workload(task="inference", batch_size=1, context_length=2048, output_tokens=256)
    usable = int(80 * GIB * 0.9)  # the engine's 90 %, which is also the plan's 10 % headroom
    assert serving_layout(L70, p, w, 2, usable, load_overheads(), SD.engine) == Layout(tp=2)
    # 141 GB of weights: half of them, the workspace and CUDA graphs fit 90 % of 80 GiB; more GPUs, more replicas
    assert serving_layout(L70, p, w, 8, usable, load_overheads(), SD.engine) == Layout(tp=2)
    assert serving_layout(L70, p, w, 8, int(40 * GIB * 0.9), load_overheads(), SD.engine) == Layout(tp=4)


def test_estimate_on_several_gpus_picks_the_layout_and_says_so() -> None:
    r = api.estimate({"model": {"preset": "llama-3.1-70b"},
                      "workload": {"task": "inference", "context_length": 2048, "output_tokens": 256,
                                   "arrival_rate": 0.3},
                      "hardware": {"gpu": "h100-sxm-80gb", "gpus": 8}})
    assert (r.hardware.layout["tp"], r.hardware.layout["dp"]) == (2, 4)
    assert "serving-layout" in {n.code for n in r.notes}
    inf = r.inference
    assert inf is not None and inf.requests_per_s == pytest.approx(0.3) and inf.replicas == 4
    assert inf.concurrency == pytest.approx(inf.requests_per_s * inf.request_latency_s, rel=0.02)


def test_load_keys_on_a_training_task_are_refused() -> None:
    with pytest.raises(InputError) as err:
        api.estimate({"model": {"preset": "llama-3.1-8b"}, "workload": {"task": "lora", "users": 10}})
    assert tuple(err.value.loc) == ("workload", "users")


def test_over_capacity_load_says_how_many_replicas() -> None:
    r = api.estimate({"model": {"preset": "llama-3.1-8b"},
                      "workload": {"task": "inference", "use_case": "chat", "arrival_rate": 500.0},
                      "hardware": {"gpu": "h100-sxm-80gb", "gpus": 1}})
    inf = r.inference
    assert inf is not None and inf.replicas_needed is not None and inf.replicas_needed > 1
    assert {"over-capacity", "replicas-needed"} & {n.code for n in r.notes}


def test_plan_adds_pipeline_stages_when_a_replica_outgrows_a_server() -> None:
    # Llama 3.1 405B in bf16 is 810 GB: no 8-GPU H100 server holds a replica, two do at tp 8 x pp 2
    r = api.plan({"model": {"preset": "llama-3.1-405b"},
                  "workload": {"task": "inference", "context_length": 4096, "output_tokens": 256, "arrival_rate": 1.0,
                               "slo": {"ttft_s": 3, "itl_s": 0.1}},
                  "goals": {"purpose": "production"}})
    h100 = [c for c in r.candidates if c.gpu_id == "h100-sxm-80gb"]
    assert h100 and (int(h100[0].layout["tp"]), int(h100[0].layout["pp"])) == (8, 2)
    for c in r.candidates:
        inf = c.inference
        assert inf is not None and inf.replicas_needed is not None
        assert inf.replicas_needed <= int(c.layout["replicas"])
        assert inf.objectives_met
