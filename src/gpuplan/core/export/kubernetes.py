"""Kubernetes manifests for a serving candidate (`gpuplan export --to kserve|lws`): the plan's replicas, GPUs per
pod, tensor and pipeline parallel degrees, vLLM's engine flags, resource requests (the replica's share of the
planned server) and an autoscaling rule on the load the plan sized for.

- kserve: a KServe InferenceService with the Hugging Face serving runtime (vLLM backend; vLLM's engine arguments
  pass through its args: KServe docs, "Hugging Face LLM Serving Runtime"). A replica within one server is one pod,
  autoscaled on concurrency (Knative: `scaleMetric: concurrency`, `scaleTarget`) between the replicas the load
  needs and the replicas planned with headroom. A replica over several servers uses `workerSpec` (tensorParallelSize
  per node, pipelineParallelSize nodes) and gets no autoscaling: KServe's multi-node mode has none.
- lws: a LeaderWorkerSet (one group of pods per replica: a leader and `size - 1` workers joined by Ray with vLLM's
  examples/online_serving/multi-node-serving.sh, as vLLM's LWS deployment guide runs it) and a
  HorizontalPodAutoscaler on the LeaderWorkerSet scaling on the requests each replica keeps in flight.

Pure: text in, text out."""

from __future__ import annotations

import math
from typing import Any

from gpuplan.core.export.common import (
    comment,
    engine_batch_cap,
    engine_command,
    origin,
    server_line,
    slug,
    to_yaml,
    vllm_engine_flags,
)
from gpuplan.core.export.skypilot import ROCM_GPUS
from gpuplan.errors import InputError
from gpuplan.schema.plan import Candidate
from gpuplan.schema.project import Project
from gpuplan.units import GIB

#: the vLLM OpenAI server image the LWS groups run (vLLM's LWS guide); KServe brings its own runtime image
VLLM_IMAGE = "vllm/vllm-openai:latest"
#: vLLM's helper that starts (leader) or joins (worker) the Ray cluster of one multi-node replica, as shipped in
#: the image (vLLM docs, examples/online_serving/multi-node-serving.sh)
RAY_SCRIPT = "/vllm-workspace/examples/online_serving/multi-node-serving.sh"
#: the name a Prometheus adapter gives vLLM's gauge of running requests (`vllm:num_requests_running`)
RUNNING_METRIC = "vllm_num_requests_running"


class Replicas:
    """A serving candidate's shape: replicas, nodes and GPUs per replica, and the autoscaling bounds and target."""

    def __init__(self, c: Candidate) -> None:
        lay = c.layout
        self.tp, self.pp = lay.tp, lay.pp
        self.gpus = self.tp * self.pp  # per replica
        self.nodes = max(math.ceil(self.gpus / c.gpus_per_server), 1)
        self.gpus_per_pod = self.gpus // self.nodes
        total = c.servers * c.gpus_per_server
        self.replicas = lay.replicas if lay.replicas is not None else max(total // self.gpus, 1)
        self.batch = lay.batch_per_replica
        self.cap = engine_batch_cap(c)  # --max-num-seqs: a fixed batch only
        inf = c.inference
        # the plan's own numbers: at most the replicas it planned (the load with its headroom), at least those the
        # load needs at each replica's capacity within the objectives; the target is the requests in flight per
        # replica at the planned load
        need = self.replicas
        target = self.batch or 1
        if inf is not None and inf.replicas >= 1:
            cap = inf.capacity_requests_per_s_per_replica
            if cap and cap > 0 and inf.requests_per_s > 0:
                need = min(max(math.ceil(inf.requests_per_s / cap - 1e-9), 1), self.replicas)
            if inf.concurrency > 0:
                target = max(math.ceil(inf.concurrency / inf.replicas - 1e-9), 1)
        self.min_replicas, self.max_replicas, self.target = need, self.replicas, target


def vllm_args(p: Project, c: Candidate, r: Replicas, parallel: bool = True) -> tuple[list[str], list[str]]:
    """vLLM's engine arguments for the candidate (tensor and pipeline parallel unless `parallel` is False, where the
    platform sets them), and notes on what to check."""
    args: list[str] = []
    if parallel:
        args += ["--tensor-parallel-size", str(r.tp)]
        if r.pp > 1:
            args += ["--pipeline-parallel-size", str(r.pp)]
    flags, notes = vllm_engine_flags(p.workload, r.cap, "the model id")
    args += flags
    return args, notes


def _resources(c: Candidate, gpus: int) -> dict[str, Any]:
    """Requests and limits of a pod with `gpus` GPUs: the GPUs, and its share of the planned server's CPU cores and
    RAM."""
    share = gpus / c.gpus_per_server
    kind = "amd.com/gpu" if c.gpu_id in ROCM_GPUS else "nvidia.com/gpu"
    cpu = max(int(c.server.cpu_cores * share), 1)
    mem = f"{max(int(c.server.ram_bytes * share // GIB), 1)}Gi"
    return {"requests": {"cpu": str(cpu), "memory": mem, kind: str(gpus)}, "limits": {kind: str(gpus)}}


def check_serving(p: Project, c: Candidate | None = None, target: str = "these manifests") -> None:
    """Refuse a project the serving manifests cannot run: a training task, or an engine other than vLLM (the
    message then gives the engine's own launch command for the candidate `c`)."""
    if p.workload.task != "inference":
        raise InputError(["--to"], f"project {p.name!r} trains (workload.task: {p.workload.task}); kserve, lws and "
                         "vllm-helm write serving manifests", "accelerate, deepspeed, torchrun, skypilot")
    if (p.workload.engine or "vllm") != "vllm":
        command = engine_command(p.workload, c, "MODEL_ID") if c is not None else None
        raise InputError(["workload", "engine"], f"{target} run vLLM; the plan was made for engine "
                         f"{p.workload.engine}" + (f", which runs as: {command}" if command else ""),
                         "engine: vllm (or run that command in your own manifest)")


def _header(p: Project, c: Candidate, index: int, r: Replicas, model_id: str | None, extra: list[str]) -> list[str]:
    layout = (f"Serving layout: tensor parallel {r.tp}" + (f", pipeline parallel {r.pp}" if r.pp > 1 else "")
              + f"; {r.replicas} replica(s) of {r.gpus} GPU(s)" + (f" over {r.nodes} nodes" if r.nodes > 1 else "")
              + (f", up to {r.batch} concurrent sequences each." if r.batch else "."))
    scale = (f"Autoscaling: {r.min_replicas}-{r.max_replicas} replicas, a target of {r.target} request(s) in flight "
             "per replica (the planned load's), the most the plan sized with its headroom.")
    return [origin(p, c, index), layout, server_line(c), scale,
            "Edit: the model id (" + ("none known: set it" if model_id is None else "the project's model on the "
                                      "Hugging Face Hub") + "), the namespace, and a secret HF_TOKEN for gated "
            "models.", *extra]


def render_kserve(p: Project, c: Candidate, index: int, model_id: str | None) -> str:
    """A KServe InferenceService (Hugging Face runtime, vLLM backend) for the candidate's replicas."""
    check_serving(p, c, "kserve and lws manifests")
    r = Replicas(c)
    name = slug(p.name)
    multi = r.nodes > 1
    args, notes = vllm_args(p, c, r, parallel=not multi)
    model: dict[str, Any] = {"modelFormat": {"name": "huggingface"},
                             "args": [f"--model_name={name}", f"--model_id={model_id or 'MODEL_ID'}", *args],
                             "resources": _resources(c, r.gpus_per_pod)}
    predictor: dict[str, Any] = {"minReplicas": r.min_replicas, "maxReplicas": r.max_replicas}
    if multi:  # KServe's multi-node mode: no autoscaling, the parallel degrees on workerSpec
        predictor = {"minReplicas": r.replicas, "maxReplicas": r.replicas, "model": model,
                     "workerSpec": {"tensorParallelSize": r.tp, "pipelineParallelSize": r.pp}}
        notes.append(f"Each replica spans {r.nodes} nodes: KServe's multi-node mode (RawDeployment, a ReadWriteMany "
                     "PVC for the model) has no autoscaling, so the replicas are fixed at the plan's.")
    else:
        predictor.update(scaleMetric="concurrency", scaleTarget=r.target, model=model)
    isvc = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "annotations": {"gpuplan/gpu": c.gpu_id}},
            "spec": {"predictor": predictor}}
    header = _header(p, c, index, r, model_id, [*notes, "Apply: kubectl apply -f kserve.yaml"])
    return comment(header) + to_yaml(isvc)


def render_lws(p: Project, c: Candidate, index: int, model_id: str | None) -> str:
    """A LeaderWorkerSet (one group per replica) running vLLM, and a HorizontalPodAutoscaler on it."""
    check_serving(p, c, "kserve and lws manifests")
    r = Replicas(c)
    name = slug(p.name)
    args, notes = vllm_args(p, c, r)
    serve = " ".join(["vllm", "serve", model_id or "MODEL_ID", "--port", "8080", *args])
    res = _resources(c, r.gpus_per_pod)
    port = [{"containerPort": 8080}]
    if r.nodes > 1:
        leader_cmd = f"bash {RAY_SCRIPT} leader --ray_cluster_size=$(LWS_GROUP_SIZE); {serve}"
        worker_cmd = f"bash {RAY_SCRIPT} worker --ray_address=$(LWS_LEADER_ADDRESS)"
    else:
        leader_cmd, worker_cmd = serve, ""
    leader = {"spec": {"containers": [{"name": "vllm-leader", "image": VLLM_IMAGE, "command": ["sh", "-c", leader_cmd],
                                       "resources": res, "ports": port}]}}
    group: dict[str, Any] = {"size": r.nodes, "restartPolicy": "RecreateGroupOnPodRestart", "leaderTemplate": leader}
    if r.nodes > 1:
        group["workerTemplate"] = {"spec": {"containers": [{"name": "vllm-worker", "image": VLLM_IMAGE,
                                                             "command": ["sh", "-c", worker_cmd], "resources": res}]}}
    else:  # LWS needs a worker template; a group of one runs the leader alone
        group["workerTemplate"] = {"spec": {"containers": [{"name": "vllm-worker", "image": VLLM_IMAGE,
                                                             "resources": res}]}}
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": name},
           "spec": {"replicas": r.replicas, "leaderWorkerTemplate": group}}
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
           "spec": {"scaleTargetRef": {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                       "name": name},
                    "minReplicas": r.min_replicas, "maxReplicas": r.max_replicas,
                    "metrics": [{"type": "Pods", "pods": {"metric": {"name": RUNNING_METRIC},
                                                          "target": {"type": "AverageValue",
                                                                     "averageValue": str(r.target)}}}]}}
    notes.append(f"The autoscaler reads vLLM's vllm:num_requests_running through a Prometheus adapter as "
                 f"{RUNNING_METRIC}; rename it to what your adapter exposes.")
    header = _header(p, c, index, r, model_id, [*notes, "Apply: kubectl apply -f lws.yaml (LeaderWorkerSet "
                                                       "installed)"])
    return comment(header) + to_yaml(lws) + "---\n" + to_yaml(hpa)


__all__ = ["RAY_SCRIPT", "RUNNING_METRIC", "VLLM_IMAGE", "Replicas", "check_serving", "render_kserve", "render_lws",
           "vllm_args"]
