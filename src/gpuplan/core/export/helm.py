"""Helm values for vLLM's production stack (`gpuplan export --to vllm-helm`; issue #29): the `vllm-stack` chart of
vllm-project/production-stack (helm/values.yaml, helm/values.schema.json, chart 0.1.x), one
`servingEngineSpec.modelSpec[]` entry carrying the plan's replicas, GPUs per pod, tensor and pipeline parallel
degrees and vLLM's engine flags (core/export/common.vllm_engine_flags), resource requests (the replica's share of the
planned server) and, for replicas within one server, a KEDA autoscaling rule on the load the plan sized for.

- A replica within one server: a Deployment of `replicaCount` pods, each `requestGPU` GPUs; the chart's
  `vllmConfig` keys where it has one (tensorParallelSize, maxModelLen, maxNumSeqs, gpuMemoryUtilization, dtype,
  enablePrefixCaching), the other flags in `vllmConfig.extraArgs` (the Deployment's template passes no
  pipelineParallelSize, so pipeline stages within a server go there too). `keda`: between the replicas the load
  needs and those planned, on the chart's default trigger; the plan's own target (the requests each replica keeps
  in flight, vLLM's `vllm:num_requests_running`) is written in the header, since the chart's schema types
  `keda.triggers` as an object where KEDA takes a list.
- A replica over several servers: the chart's RayCluster form (`raySpec.enabled`; tutorials/
  15-basic-pipeline-parallel.md): one Ray node per server, `tensorParallelSize` the GPUs of each node (its
  `requestGPU`, the head's too), `pipelineParallelSize` the nodes, `replicaCount` the worker nodes (nodes - 1). One
  Ray cluster is one replica, so each replica is its own modelSpec entry; the chart autoscales no RayCluster.

Pure: text in, text out."""

from __future__ import annotations

from typing import Any

from gpuplan.core.export.common import comment, origin, server_line, slug, to_yaml, vllm_engine_flags
from gpuplan.core.export.kubernetes import Replicas, check_serving
from gpuplan.core.export.skypilot import ROCM_GPUS
from gpuplan.errors import InputError
from gpuplan.schema.plan import Candidate
from gpuplan.schema.project import Project
from gpuplan.units import GIB

#: the engine image the chart's examples run (helm/values-example.yaml, tutorials/assets)
REPOSITORY, TAG = "vllm/vllm-openai", "latest"
#: the Prometheus the chart's default KEDA trigger reads (helm/templates/scaledobject-vllm.yaml)
PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"
#: vLLM flags the chart's vllmConfig has a key for: flag -> (key, type); the others go to extraArgs
CONFIG_KEYS: dict[str, tuple[str, type]] = {
    "--max-num-seqs": ("maxNumSeqs", int), "--max-model-len": ("maxModelLen", int),
    "--gpu-memory-utilization": ("gpuMemoryUtilization", float), "--dtype": ("dtype", str),
    "--tensor-parallel-size": ("tensorParallelSize", int),
}


def vllm_config(flags: list[str], tp: int, pp: int, ray: bool) -> dict[str, Any]:
    """The chart's `vllmConfig` for vLLM's `flags` (pairs of a flag and its value, and lone switches) at tensor
    parallel `tp` and pipeline parallel `pp` (`ray`: the RayCluster form, whose template has pipelineParallelSize)."""
    cfg: dict[str, Any] = {"tensorParallelSize": tp}
    extra: list[str] = []
    if pp > 1:
        if ray:
            cfg["pipelineParallelSize"] = pp
        else:
            extra += ["--pipeline-parallel-size", str(pp)]
    # the chart writes --no-enable-prefix-caching unless this is true: the plan's assumption either way
    cfg["enablePrefixCaching"] = "--enable-prefix-caching" in flags
    i = 0
    while i < len(flags):
        flag = flags[i]
        takes_value = i + 1 < len(flags) and not flags[i + 1].startswith("--")
        if flag in CONFIG_KEYS and takes_value:
            key, kind = CONFIG_KEYS[flag]
            cfg[key] = kind(flags[i + 1])
        elif flag != "--enable-prefix-caching":
            extra += [flag, flags[i + 1]] if takes_value else [flag]
        i += 2 if takes_value else 1
    if extra:
        cfg["extraArgs"] = extra
    return cfg


def _requests(c: Candidate, gpus: int) -> dict[str, Any]:
    """requestCPU, requestMemory and requestGPU of a pod with `gpus` GPUs: the GPUs and its share of the planned
    server's CPU cores and RAM."""
    share = gpus / c.gpus_per_server
    return {"requestCPU": max(int(c.server.cpu_cores * share), 1),
            "requestMemory": f"{max(int(c.server.ram_bytes * share // GIB), 1)}Gi", "requestGPU": gpus}


def render_vllm_helm(p: Project, c: Candidate, index: int, model_id: str | None) -> str:
    """values.yaml for the vllm-stack chart serving the candidate's replicas."""
    check_serving(p, c, "vLLM production-stack values")
    r = Replicas(c)
    name = slug(p.name)
    flags, notes = vllm_engine_flags(p.workload, r.batch, "modelURL")
    base = {"repository": REPOSITORY, "tag": TAG, "modelURL": model_id or "MODEL_ID"}
    if c.gpu_id in ROCM_GPUS:
        notes.append("AMD GPUs: set requestGPUType to amd.com/gpu and the repository to a ROCm vLLM image.")
    if r.nodes == 1:
        spec = {"name": name, **base, "replicaCount": r.replicas, **_requests(c, r.gpus),
                "vllmConfig": vllm_config(flags, r.tp, r.pp, ray=False),
                "keda": {"enabled": True, "minReplicaCount": r.min_replicas, "maxReplicaCount": r.max_replicas}}
        specs = [spec]
        scale = (f"Autoscaling (KEDA): {r.min_replicas}-{r.max_replicas} replicas (those the load needs at each "
                 "replica's capacity within the objectives, those planned with headroom), on the chart's default "
                 "trigger (vllm:num_requests_waiting above 5). The plan's own target is "
                 f"{r.target} request(s) in flight per replica: a prometheus trigger with query "
                 f'sum(vllm:num_requests_running{{model="{name}"}}) and threshold "{r.target}" (server {PROMETHEUS}); '
                 "the chart's values.schema.json (0.1.12) types keda.triggers as an object where KEDA takes a list, so "
                 "it passes helm's validation only with --skip-schema-validation. Without KEDA in the cluster set "
                 "keda.enabled: false.")
    else:
        if r.pp != r.nodes or r.tp != r.gpus_per_pod:
            raise InputError(["--to"], f"the chart's RayCluster form runs one pipeline stage per node with tensor "
                             f"parallelism within it; this replica is tp {r.tp} x pp {r.pp} over {r.nodes} nodes of "
                             f"{r.gpus_per_pod} GPUs", "kserve or lws (any layout over nodes)")
        head = _requests(c, r.gpus_per_pod)
        specs = [{"name": f"{name}-{k}" if r.replicas > 1 else name, **base, "replicaCount": r.nodes - 1, **head,
                  "vllmConfig": vllm_config(flags, r.tp, r.pp, ray=True),
                  "raySpec": {"enabled": True, "headNode": dict(head)}} for k in range(r.replicas)]
        scale = (f"Each replica spans {r.nodes} nodes: a RayCluster (KubeRay operator installed) of a head and "
                 f"{r.nodes - 1} worker(s), one modelSpec entry per replica; the chart autoscales no RayCluster, so "
                 f"the replicas are fixed at the plan's {r.replicas}. The image must carry Ray and its CLI (the "
                 "chart's tutorial 15, basic pipeline parallel).")
    layout = (f"Serving layout: tensor parallel {r.tp}" + (f", pipeline parallel {r.pp}" if r.pp > 1 else "")
              + f"; {r.replicas} replica(s) of {r.gpus} GPU(s)" + (f" over {r.nodes} nodes" if r.nodes > 1 else "")
              + (f", up to {r.batch} concurrent sequences each." if r.batch else "."))
    header = [origin(p, c, index), layout, server_line(c), scale,
              "Edit: modelURL (" + ("none known: set it" if model_id is None else "the project's model on the "
                                    "Hugging Face Hub") + "), hf_token for gated models, and the requests to what your "
              "nodes can allocate.", *notes,
              "Install: helm repo add vllm https://vllm-project.github.io/production-stack && helm install vllm "
              "vllm/vllm-stack -f values.yaml"]
    return comment(header) + to_yaml({"servingEngineSpec": {"modelSpec": specs}})


__all__ = ["CONFIG_KEYS", "PROMETHEUS", "REPOSITORY", "TAG", "render_vllm_helm", "vllm_config"]
