"""`gpuplan export --to vllm-helm` (issue #29): values.yaml for vLLM's production-stack chart (`vllm-stack`) that loads,
matches the plan's replicas, GPUs per pod, parallel degrees and engine flags, and holds to the chart's
values.schema.json for the keys it writes (docs/export.md)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpuplan.core.export.helm import vllm_config
from gpuplan.core.export.kubernetes import Replicas, vllm_args
from gpuplan.core.export.targets import export
from gpuplan.errors import InputError

from .test_export_k8s import SERVING, _check_scaling, multi_node, planned

#: the JSON types vllm-project/production-stack's helm/values.schema.json (chart 0.1.12, commit 01eaf92c, 2026-07-29)
#: gives the keys this export writes under servingEngineSpec.modelSpec[] (None: an object checked key by key below)
SCHEMA: dict[str, Any] = {
    "name": "string", "repository": "string", "tag": "string", "modelURL": "string", "replicaCount": "integer",
    "requestCPU": "integer", "requestMemory": "string", "requestGPU": ("integer", "number", "string"),
    "vllmConfig": {"tensorParallelSize": "integer", "pipelineParallelSize": "integer", "maxModelLen": "integer",
                   "maxNumSeqs": "integer", "gpuMemoryUtilization": ("integer", "number", "string"),
                   "dtype": "string", "enablePrefixCaching": "boolean", "extraArgs": "array"},
    "keda": {"enabled": "boolean", "minReplicaCount": "integer", "maxReplicaCount": "integer"},
    "raySpec": {"enabled": "boolean", "headNode": {"requestCPU": "integer", "requestGPU": "integer",
                                                   "requestMemory": "string"}},
}
JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list}


def _conforms(value: dict[str, Any], schema: dict[str, Any], where: str) -> None:
    for key, v in value.items():
        assert key in schema, f"{where}.{key} is not a key gpuplan checked against the chart's schema"
        want = schema[key]
        if isinstance(want, dict):
            assert isinstance(v, dict), f"{where}.{key}"
            _conforms(v, want, f"{where}.{key}")
            continue
        kinds = want if isinstance(want, tuple) else (want,)
        ok = any(isinstance(v, JSON_TYPES[k]) and not (k in ("integer", "number") and isinstance(v, bool))
                 for k in kinds)
        assert ok, f"{where}.{key}: {v!r} is not {want}"


def chart_args(cfg: dict[str, Any]) -> list[str]:
    """The vLLM arguments the chart's templates write for a vllmConfig (helm/templates/deployment-vllm-multi.yaml and
    ray-cluster.yaml at commit a6c01db: --enable-prefix-caching or --no-enable-prefix-caching, then one flag per key,
    then extraArgs)."""
    args = ["--enable-prefix-caching" if cfg.get("enablePrefixCaching") else "--no-enable-prefix-caching"]
    for key, flag in (("maxModelLen", "--max-model-len"), ("dtype", "--dtype"),
                      ("tensorParallelSize", "--tensor-parallel-size"), ("pipelineParallelSize",
                                                                         "--pipeline-parallel-size"),
                      ("maxNumSeqs", "--max-num-seqs"), ("gpuMemoryUtilization", "--gpu-memory-utilization")):
        if key in cfg:
            args += [flag, str(cfg[key])]
    return args + list(cfg.get("extraArgs", []))


def _pairs(args: list[str]) -> set[tuple[str, str]]:
    out, i = set(), 0
    while i < len(args):
        takes = i + 1 < len(args) and not args[i + 1].startswith("--")
        out.add((args[i], args[i + 1] if takes else ""))
        i += 2 if takes else 1
    return out


@pytest.mark.parametrize("name", SERVING)
def test_vllm_helm_matches_the_plan(name: str) -> None:
    proj, plan = planned(name)
    c = plan.recommendation
    assert c is not None
    _, text = export(proj, c, "vllm-helm")
    specs = yaml.safe_load(text)["servingEngineSpec"]["modelSpec"]
    assert len(specs) == 1
    spec = specs[0]
    _conforms(spec, SCHEMA, "modelSpec[0]")
    lay = c.layout
    assert spec["replicaCount"] == lay.replicas
    assert spec["requestGPU"] == lay.tp * lay.pp <= c.gpus_per_server
    cfg = spec["vllmConfig"]
    assert cfg["tensorParallelSize"] == lay.tp
    assert cfg["maxNumSeqs"] == lay.batch_per_replica
    w = proj.workload
    assert cfg["maxModelLen"] == (w.context_length or 0) + (w.output_tokens or 0)
    assert cfg["enablePrefixCaching"] is False  # the plan counts on none: the chart turns it off
    keda = spec["keda"]
    assert keda["enabled"] is True
    _check_scaling(keda["minReplicaCount"], keda["maxReplicaCount"], c)
    # the engine runs with the same flags as the KServe and LWS manifests, as the chart's template writes them
    r = Replicas(c)
    assert _pairs(chart_args(cfg)) == _pairs(vllm_args(proj, c, r)[0]) | {("--no-enable-prefix-caching", "")}
    header = " ".join(ln[1:].strip() for ln in text.splitlines() if ln.startswith("#"))
    assert f"{r.target} request(s) in flight per replica" in header  # the plan's autoscaling target, said


def test_a_replica_over_two_servers_is_a_ray_cluster_per_replica() -> None:
    proj, plan = multi_node()
    c = plan.recommendation
    assert c is not None and c.layout.tp * c.layout.pp > c.gpus_per_server
    _, text = export(proj, c, "vllm-helm")
    specs = yaml.safe_load(text)["servingEngineSpec"]["modelSpec"]
    lay = c.layout
    assert len(specs) == lay.replicas
    nodes = lay.tp * lay.pp // c.gpus_per_server
    for k, spec in enumerate(specs):
        _conforms(spec, SCHEMA, f"modelSpec[{k}]")
        cfg = spec["vllmConfig"]
        # the chart's pipeline-parallel rules (tutorials/15-basic-pipeline-parallel.md): tensorParallelSize the GPUs
        # of each node, equal to requestGPU and the head's; pipelineParallelSize the nodes, replicaCount + 1
        assert cfg["tensorParallelSize"] == spec["requestGPU"] == spec["raySpec"]["headNode"]["requestGPU"]
        assert cfg["pipelineParallelSize"] == spec["replicaCount"] + 1 == nodes
        assert cfg["tensorParallelSize"] * cfg["pipelineParallelSize"] == lay.tp * lay.pp
        assert spec["raySpec"]["enabled"] is True and "keda" not in spec
    assert len({s["name"] for s in specs}) == len(specs)


def test_prefix_caching_and_the_other_flags_reach_the_chart() -> None:
    cfg = vllm_config(["--max-num-seqs", "16", "--quantization", "fp8", "--enable-prefix-caching",
                       "--kv-cache-dtype", "fp8"], 2, 2, ray=False)
    assert cfg["enablePrefixCaching"] is True and cfg["maxNumSeqs"] == 16
    # pipeline stages within one server: the Deployment's template has no pipelineParallelSize key
    assert "pipelineParallelSize" not in cfg
    assert cfg["extraArgs"] == ["--pipeline-parallel-size", "2", "--quantization", "fp8", "--kv-cache-dtype", "fp8"]
    assert vllm_config([], 8, 2, ray=True)["pipelineParallelSize"] == 2


def test_a_training_project_is_refused() -> None:
    proj, plan = planned("llama3-8b-qlora")
    assert plan.recommendation is not None
    with pytest.raises(InputError, match="vllm-helm"):
        export(proj, plan.recommendation, "vllm-helm")
