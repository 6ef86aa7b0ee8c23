"""`gpuplan export`: every candidate of every training example, for each launcher, read back by the launcher's
own code where it installs (Accelerate's config loader and launch preparation, DeepSpeed's config, torchrun's
argument parser, the Hugging Face Trainer's arguments, bash's syntax check); SkyPilot by its keys; inference
projects; the command's file handling (nothing the user wrote is overwritten)."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.catalog.loader import example_names, example_path, load_project
from gpuplan.cli import export as export_command
from gpuplan.core.export.common import FRAMEWORK_TARGETS, STACK_TARGETS
from gpuplan.core.export.targets import FILENAMES, SERVING_TARGETS, SKYPILOT_ACCELERATORS, TARGETS, export
from gpuplan.errors import InputError
from gpuplan.schema.plan import Candidate, PlanResult
from gpuplan.schema.project import Project

EXAMPLES = example_names()
#: GRPO's launcher (a verl or TRL job) is not written yet: export refuses it (tests/golden/test_grpo_example.py)
TRAINING = [n for n in EXAMPLES if load_project(example_path(n))[0].workload.task not in ("inference", "grpo")]
SERVING = [n for n in EXAMPLES if load_project(example_path(n))[0].workload.task == "inference"]


@functools.cache
def planned(name: str) -> tuple[Project, PlanResult]:
    proj, base = load_project(example_path(name))
    return proj, api.plan(proj, base_dir=base)


def candidates(name: str) -> list[tuple[int, Candidate]]:
    return list(enumerate(planned(name)[1].candidates))


def accum(c: Candidate) -> int:
    lay = c.layout
    return int(lay.global_batch_size) // (int(lay.micro_batch_size) * int(lay.dp))


def header(text: str) -> str:
    """The leading comment as one line of prose (wrapping undone)."""
    lines = []
    for ln in text.splitlines():
        if not ln.startswith("#"):
            break
        lines.append(ln.lstrip("#").strip())
    return " ".join(lines)


def with_layout(c: Candidate, **kw: Any) -> Candidate:
    return c.model_copy(update={"layout": c.layout.model_copy(update=kw)})


def with_precision(p: Project, precision: str) -> Project:
    return p.model_copy(update={"workload": p.workload.model_copy(update={"precision": precision})})


def test_examples_cover_training_and_serving() -> None:
    assert TRAINING and SERVING


def test_unknown_target() -> None:
    p, r = planned(TRAINING[0])
    with pytest.raises(InputError, match="unknown target"):
        export(p, r.candidates[0], "slurm")


# ------------------------------------------------------------------------------------------------- deepspeed

def refused_for_its_stack(p: Project, i: int, c: Candidate, target: str) -> bool:
    """Whether the candidate's framework has no `target` launcher; if so, the export says so rather than writing a
    launcher for a stack the plan did not time (issue #30)."""
    fw = c.stack.framework if c.stack is not None else None
    allowed = FRAMEWORK_TARGETS.get(fw or "")
    if allowed is None or target in allowed:
        return False
    with pytest.raises(InputError, match="which the plan did not time"):
        export(p, c, target, index=i)
    return True


def deepspeed_or_refusal(p: Project, i: int, c: Candidate) -> dict[str, Any] | None:
    if refused_for_its_stack(p, i, c, "deepspeed"):
        return None
    if c.layout.pp > 1 and c.layout.zero >= 2:
        with pytest.raises(InputError, match="ZeRO stage 0 or 1"):
            export(p, c, "deepspeed", index=i)
        return None
    name, text = export(p, c, "deepspeed", index=i)
    assert name == "ds_config.json"
    return json.loads(text)


@pytest.mark.parametrize("name", TRAINING)
def test_deepspeed_keys_and_batch_arithmetic(name: str) -> None:
    p, _ = planned(name)
    for i, c in candidates(name):
        cfg = deepspeed_or_refusal(p, i, c)
        if cfg is None:
            continue
        lay = c.layout
        assert cfg["train_micro_batch_size_per_gpu"] == lay.micro_batch_size
        assert cfg["gradient_accumulation_steps"] == accum(c)
        assert cfg["train_batch_size"] == lay.micro_batch_size * accum(c) * lay.dp == lay.global_batch_size
        assert cfg["zero_optimization"]["stage"] == lay.zero
        assert cfg["bf16"] == {"enabled": True}  # every example trains in bf16-mixed
        assert ("tensor_parallel" in cfg) == (lay.tp > 1 and lay.pp == 1)
        assert ("pipeline" in cfg) == (lay.pp > 1)
        assert ("activation_checkpointing" in cfg) == lay.gradient_checkpointing
        assert f"candidate {i}:" in cfg["_gpuplan"]["generated_by"] and p.name in cfg["_gpuplan"]["generated_by"]


@pytest.fixture
def deepspeed_config(monkeypatch: pytest.MonkeyPatch) -> Any:
    """DeepSpeed's own config class, told the data-parallel world size as its engine does (through an mpu)."""
    pytest.importorskip("deepspeed")
    import deepspeed.comm as dist
    from deepspeed.runtime.config import DeepSpeedConfig

    monkeypatch.setattr(dist, "get_rank", lambda *a, **k: 0)  # no process group in a test

    class Mpu:
        def __init__(self, dp: int) -> None:
            self.dp = dp

        def get_data_parallel_world_size(self) -> int:
            return self.dp

    return lambda cfg, dp: DeepSpeedConfig(cfg, mpu=Mpu(dp))


@pytest.mark.parametrize("name", TRAINING)
def test_deepspeed_accepts_every_config(name: str, deepspeed_config: Any) -> None:
    p, _ = planned(name)
    for i, c in candidates(name):
        cfg = deepspeed_or_refusal(p, i, c)
        if cfg is not None:
            ds = deepspeed_config(cfg, c.layout.dp)
            assert ds.train_batch_size == c.layout.global_batch_size
            assert ds.zero_optimization_stage == c.layout.zero


@pytest.mark.parametrize("precision", ["fp32", "fp16-mixed", "bf16-mixed", "bf16", "fp8-mixed"])
@pytest.mark.parametrize("zero,offload", [(0, "none"), (1, "optimizer"), (2, "none"), (3, "params")])
def test_deepspeed_precision_and_offload(precision: str, zero: int, offload: str) -> None:
    p, r = planned("llama3-8b-full-finetune")
    p = with_precision(p, precision)
    c = with_layout(r.candidates[0], zero=zero, offload=offload, gradient_checkpointing=True)
    cfg = json.loads(export(p, c, "deepspeed")[1])
    assert ("fp16" in cfg) == (precision == "fp16-mixed")
    assert ("bf16" in cfg) == (precision in ("bf16-mixed", "bf16", "fp8-mixed"))
    assert cfg.get("bf16", {}).get("bf16_master_weights_and_grads", False) == (precision == "bf16" and zero > 0)
    z = cfg["zero_optimization"]
    assert ("offload_optimizer" in z) == (offload != "none")
    assert ("offload_param" in z) == (offload == "params")
    try:
        import deepspeed  # noqa: F401
    except ImportError:
        return
    import deepspeed.comm as dist
    from deepspeed.runtime.config import DeepSpeedConfig

    real = dist.get_rank
    dist.get_rank = lambda *a, **k: 0
    try:
        mpu = type("Mpu", (), {"get_data_parallel_world_size": lambda self: c.layout.dp})()
        DeepSpeedConfig(cfg, mpu=mpu)
    finally:
        dist.get_rank = real


# ------------------------------------------------------------------------------------------------- accelerate

def accelerate_or_refusal(p: Project, i: int, c: Candidate) -> str | None:
    if refused_for_its_stack(p, i, c, "accelerate"):
        return None
    if c.layout.pp > 1:
        with pytest.raises(InputError, match="pipeline parallelism"):
            export(p, c, "accelerate", index=i)
        return None
    name, text = export(p, c, "accelerate", index=i)
    assert name == "accelerate_config.yaml"
    return text


@pytest.mark.parametrize("name", TRAINING)
def test_accelerate_yaml_keys(name: str) -> None:
    p, _ = planned(name)
    for i, c in candidates(name):
        text = accelerate_or_refusal(p, i, c)
        if text is None:
            continue
        assert text.startswith(f"# Generated by gpuplan for project {p.name!r}, candidate {i}:")
        cfg = yaml.safe_load(text)
        n, lay = c.servers * c.gpus_per_server, c.layout
        assert cfg["num_processes"] == n and cfg["num_machines"] == c.servers and cfg["machine_rank"] == 0
        assert ("main_process_ip" in cfg) == (c.servers > 1)
        assert cfg["mixed_precision"] == "bf16"
        kind = cfg["distributed_type"]
        if lay.tp > 1:
            assert cfg["parallelism_config"]["parallelism_config_tp_size"] == lay.tp
            assert kind == ("FSDP" if lay.dp > 1 else "MULTI_GPU")
        elif n == 1:
            assert kind == "NO"
        elif lay.zero == 3:
            assert kind == "FSDP" and cfg["fsdp_config"]["fsdp_reshard_after_forward"] is True
        elif lay.zero in (1, 2):
            assert kind == "DEEPSPEED" and cfg["deepspeed_config"]["zero_stage"] == lay.zero
            assert cfg["deepspeed_config"]["gradient_accumulation_steps"] == accum(c)
        else:
            assert kind == "MULTI_GPU"


def accelerate_launch_env(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, str]]:
    """What `accelerate launch --config_file PATH train.py` prepares, without launching."""
    import accelerate.utils.launch as launch_utils
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    monkeypatch.setattr(launch_utils, "is_port_in_use", lambda port: False)
    args = launch_command_parser().parse_args(["--config_file", str(path), "train.py"])
    args, defaults, _ = _validate_launch_command(args)
    if args.use_deepspeed:
        args.deepspeed_fields_from_accelerate_config = ",".join(defaults.deepspeed_config)
        _, env = launch_utils.prepare_deepspeed_cmd_env(args)
    elif args.use_fsdp or args.multi_gpu:
        env = launch_utils.prepare_multi_gpu_env(args)
    else:
        _, env = launch_utils.prepare_simple_launcher_cmd_env(args)
    return args, env


@pytest.mark.parametrize("name", TRAINING)
def test_accelerate_loads_and_prepares_every_config(name: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
    from accelerate.parallelism_config import ParallelismConfig
    from accelerate.utils import FullyShardedDataParallelPlugin

    p, _ = planned(name)
    for i, c in candidates(name):
        text = accelerate_or_refusal(p, i, c)
        if text is None:
            continue
        path = tmp_path / f"{i}.yaml"
        path.write_text(text)
        cluster = load_config_from_file(str(path))
        assert isinstance(cluster, ClusterConfig)
        args, env = accelerate_launch_env(path, monkeypatch)
        n, lay = c.servers * c.gpus_per_server, c.layout
        assert args.num_processes == n
        if n > 1:
            assert int(args.nproc_per_node) == c.gpus_per_server
        if c.servers > 1:
            assert int(args.nnodes) == c.servers
        assert env["ACCELERATE_MIXED_PRECISION"] == "bf16"
        if args.use_deepspeed:
            assert env["ACCELERATE_DEEPSPEED_ZERO_STAGE"] == str(lay.zero)
            assert env["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"] == str(accum(c))
        if args.use_fsdp or lay.tp > 1:
            with monkeypatch.context() as m:
                for k, v in env.items():
                    if k.startswith(("FSDP_", "PARALLELISM_CONFIG_", "ACCELERATE_")):
                        m.setenv(k, v)
                if args.use_fsdp:
                    plugin = FullyShardedDataParallelPlugin()
                    assert plugin.fsdp_version == 2
                    assert plugin.reshard_after_forward is (lay.zero == 3)
                    assert plugin.activation_checkpointing is lay.gradient_checkpointing
                if lay.tp > 1:
                    pc = ParallelismConfig()
                    assert (pc.tp_size, pc.dp_shard_size, pc.total_size) == (lay.tp, lay.dp, n)


@pytest.mark.parametrize("precision,mixed", [("fp32", "no"), ("fp16-mixed", "fp16"), ("bf16-mixed", "bf16"),
                                             ("bf16", "no"), ("fp8-mixed", "fp8")])
def test_accelerate_precision(precision: str, mixed: str, tmp_path: Path) -> None:
    p, r = planned("llama3-8b-full-finetune")
    c = with_layout(r.candidates[0], zero=3, tp=1, pp=1, offload="none")
    text = export(with_precision(p, precision), c, "accelerate")[1]
    cfg = yaml.safe_load(text)
    assert cfg["mixed_precision"] == mixed
    if precision == "bf16":
        assert "torch_dtype=torch.bfloat16" in header(text)
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig

    (tmp_path / "a.yaml").write_text(text)
    assert ClusterConfig.from_yaml_file(str(tmp_path / "a.yaml")).mixed_precision == mixed


def test_accelerate_offload_goes_to_deepspeed() -> None:
    p, r = planned("llama3-8b-full-finetune")
    c = with_layout(r.candidates[0], zero=3, tp=1, pp=1, offload="params")
    cfg = yaml.safe_load(export(p, c, "accelerate")[1])
    assert cfg["distributed_type"] == "DEEPSPEED"
    assert cfg["deepspeed_config"]["offload_param_device"] == "cpu"
    assert cfg["deepspeed_config"]["offload_optimizer_device"] == "cpu"


# ------------------------------------------------------------------------------------------------- torchrun

def shell_command(script: str, first: str) -> list[str]:
    """The words of the command starting with `first`, as bash reads them (line continuations joined)."""
    text = script.replace("\\\n", " ")
    line = next(ln for ln in text.splitlines() if ln.strip().startswith(first))
    return shlex.split(line)


@functools.cache
def trainer_parser() -> Any:
    from transformers import HfArgumentParser, TrainingArguments

    return HfArgumentParser(TrainingArguments)


def check_megatron_args(words: list[str], p: Project, c: Candidate) -> None:
    """Megatron-LM pretrain_gpt.py's arguments (megatron/training/arguments.py; Megatron-LM is not a test
    dependency): the layout's parallel sizes and batch, the distributed optimizer exactly for ZeRO-1."""
    lay = c.layout
    opts: dict[str, str] = {}
    for k, w in enumerate(words):
        if w.startswith("--") and k + 1 < len(words) and not words[k + 1].startswith("--"):
            opts[w] = words[k + 1]
    assert opts["--tensor-model-parallel-size"] == str(lay.tp)
    assert opts["--pipeline-model-parallel-size"] == str(lay.pp)
    assert opts["--micro-batch-size"] == str(lay.micro_batch_size)
    assert opts["--global-batch-size"] == str(lay.global_batch_size)
    assert ("--use-distributed-optimizer" in words) == (lay.zero == 1)
    assert ("--recompute-granularity" in words) == lay.gradient_checkpointing
    assert "--bf16" in words


def check_script_args(words: list[str], p: Project, c: Candidate) -> None:
    lay = c.layout
    if c.stack is not None and c.stack.framework == "nemo":
        check_megatron_args(words, p, c)
        return
    assert words[:4] == ["--per_device_train_batch_size", str(lay.micro_batch_size),
                         "--gradient_accumulation_steps", str(accum(c))]
    assert ("--deepspeed" in words) == bool(lay.zero or lay.tp > 1 or lay.pp > 1)
    assert ("--gradient_checkpointing" in words) == lay.gradient_checkpointing
    try:
        parser = trainer_parser()
    except ImportError:
        return
    ns = parser.parse_args([w for w in words if w != "$@"])
    assert ns.per_device_train_batch_size == lay.micro_batch_size
    assert ns.gradient_accumulation_steps == accum(c)
    assert ns.bf16 is True


@pytest.mark.parametrize("name", TRAINING)
def test_torchrun_command_parses(name: str, tmp_path: Path) -> None:
    run = pytest.importorskip("torch.distributed.run")
    p, _ = planned(name)
    for i, c in candidates(name)[:12]:
        if refused_for_its_stack(p, i, c, "torchrun"):
            continue
        filename, script = export(p, c, "torchrun", index=i)
        assert filename == "torchrun.sh" and script.startswith("#!/usr/bin/env bash\n# Generated by gpuplan")
        words = shell_command(script, "torchrun")
        args = run.get_args_parser().parse_args(words[1:])
        assert int(args.nnodes) == c.servers and int(args.nproc_per_node) == c.gpus_per_server
        assert args.standalone == (c.servers == 1)
        if c.servers > 1:
            assert args.rdzv_backend == "c10d" and args.rdzv_endpoint.endswith(":29500")
        assert args.training_script == ("pretrain_gpt.py" if c.stack and c.stack.framework == "nemo" else "train.py")
        check_script_args(args.training_script_args, p, c)
        threads = re.search(r"^export OMP_NUM_THREADS=(\d+)", script, re.M)
        assert threads and int(threads.group(1)) == c.server.cpu_cores // c.gpus_per_server
        if shutil.which("bash"):
            (tmp_path / filename).write_text(script)
            assert subprocess.run(["bash", "-n", str(tmp_path / filename)]).returncode == 0


def test_torchrun_multi_node_needs_the_head_address(tmp_path: Path) -> None:
    p, r = planned("llama2-7b-pretrain")
    c = next(c for c in r.candidates if c.servers > 1)
    script = export(p, c, "torchrun")[1]
    (tmp_path / "t.sh").write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "HEAD_NODE_IP"}
    # fails before torchrun is looked up: the address of server 0 is required
    done = subprocess.run(["bash", str(tmp_path / "t.sh")], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "HEAD_NODE_IP" in done.stderr


# ------------------------------------------------------------------------------------------------- skypilot

@pytest.mark.parametrize("name", TRAINING)
def test_skypilot_task(name: str, tmp_path: Path) -> None:
    p, _ = planned(name)
    for i, c in candidates(name)[:12]:
        if refused_for_its_stack(p, i, c, "skypilot"):
            continue
        filename, text = export(p, c, "skypilot", index=i)
        assert filename == "skypilot.yaml" and text.startswith("# Generated by gpuplan")
        task = yaml.safe_load(text)
        assert task["num_nodes"] == c.servers
        gpu, count = task["resources"]["accelerators"].split(":")
        assert int(count) == c.gpus_per_server
        assert gpu == SKYPILOT_ACCELERATORS.get(c.gpu_id, gpu)
        if c.gpu_id not in SKYPILOT_ACCELERATORS:
            assert "sky show-gpus" in header(text)
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", task["name"])
        run = task["run"]
        if shutil.which("bash"):
            (tmp_path / "run.sh").write_text(run)
            assert subprocess.run(["bash", "-n", str(tmp_path / "run.sh")]).returncode == 0
        # the torchrun line with SkyPilot's variables as SkyPilot sets them on node 0
        values = {"SKYPILOT_NUM_NODES": str(c.servers), "SKYPILOT_NUM_GPUS_PER_NODE": str(c.gpus_per_server),
                  "SKYPILOT_NODE_RANK": "0", "HEAD_NODE_IP": "10.0.0.1"}
        words = [re.sub(r"\$(\w+)", lambda m, values=values: values[m.group(1)], w)
                 for w in shell_command(run, "torchrun")]
        try:
            from torch.distributed.run import get_args_parser
        except ImportError:
            continue
        args = get_args_parser().parse_args(words[1:])
        assert int(args.nnodes) == c.servers and int(args.nproc_per_node) == c.gpus_per_server
        if c.servers > 1:
            assert "SKYPILOT_NODE_IPS" in run and args.master_addr == "10.0.0.1"
        check_script_args(args.training_script_args, p, c)


def test_skypilot_unknown_gpu_gets_a_flagged_guess() -> None:
    p, r = planned("llama3-8b-full-finetune")
    c = r.candidates[0].model_copy(update={"gpu_id": "gaudi3-128gb"})
    text = export(p, c, "skypilot")[1]
    assert yaml.safe_load(text)["resources"]["accelerators"] == f"GAUDI3:{c.gpus_per_server}"
    assert "knows no SkyPilot name for gaudi3-128gb" in header(text)


# ------------------------------------------------------------------------------------------------- inference

@pytest.mark.parametrize("name", SERVING)
def test_serving_exports_a_skyserve_service(name: str) -> None:
    p, r = planned(name)
    for i, c in enumerate(r.candidates):
        task = yaml.safe_load(export(p, c, "skypilot", index=i, model_id="org/model")[1])
        tp = c.layout.tp
        assert task["service"]["replicas"] == c.servers
        assert task["resources"]["accelerators"].endswith(f":{c.gpus_per_server}")
        assert task["envs"] == {"MODEL_ID": "org/model"}
        words = shlex.split(task["run"])
        assert words[:2] == ["vllm", "serve"]
        assert words[words.index("--tensor-parallel-size") + 1] == str(tp)
        per_server = c.gpus_per_server // tp
        assert ("--data-parallel-size" in words) == (per_server > 1)
        assert c.servers * per_server == c.layout.replicas
        assert words[words.index("--max-num-seqs") + 1] == str(c.layout.batch_per_replica)
    task = yaml.safe_load(export(p, r.candidates[0], "skypilot")[1])
    assert task["envs"] == {"MODEL_ID": None}  # SkyPilot then requires --env MODEL_ID=...


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "skypilot" and t not in SERVING_TARGETS])
def test_serving_refuses_training_launchers(target: str) -> None:
    p, r = planned(SERVING[0])
    with pytest.raises(InputError, match="training launcher.*skypilot"):
        export(p, r.candidates[0], target)


# ------------------------------------------------------------------------------------------------- the command

@pytest.fixture
def cli() -> Any:
    app = typer.Typer()

    @app.callback()
    def main() -> None:  # a group, as gpuplan's app is
        pass

    export_command.register(app)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["export", *args])


def test_cli_prints_to_stdout(cli: Any) -> None:
    r = cli("--example", "llama3-8b-full-finetune", "--to", "deepspeed")
    assert r.exit_code == 0, r.output
    p, plan = planned("llama3-8b-full-finetune")
    assert json.loads(r.stdout) == json.loads(export(p, plan.candidates[0], "deepspeed")[1])


def test_cli_project_file_and_candidate(cli: Any) -> None:
    path = example_path("llama3-8b-qlora")
    r = cli(str(path), "--to", "accelerate", "--candidate", "2")
    assert r.exit_code == 0, r.output
    assert "candidate 2:" in r.stdout.splitlines()[0]


def test_cli_out_never_overwrites_without_force(cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "ds.json"
    out.write_text("mine\n")
    r = cli("--example", "llama3-8b-qlora", "--to", "deepspeed", "--out", str(out))
    assert r.exit_code == 2
    assert "exists" in r.stderr and "--force" in r.stderr and "Traceback" not in r.output
    assert out.read_text() == "mine\n"
    r = cli("--example", "llama3-8b-qlora", "--to", "deepspeed", "--out", str(out), "--force")
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["train_micro_batch_size_per_gpu"] >= 1
    assert r.stdout == "" and f"wrote {out}" in r.stderr


def test_cli_out_folder_gets_the_suggested_name(cli: Any, tmp_path: Path) -> None:
    for target in (t for t in TARGETS if t not in STACK_TARGETS):  # those: tests/unit/test_export_stacks.py
        example = ("llama3-70b-serving" if target in SERVING_TARGETS
                   else "qwen2.5-7b-grpo" if target in ("trl", "verl") else "vit-imagenet")
        r = cli("--example", example, "--to", target, "--out", str(tmp_path))
        assert r.exit_code == 0, r.output
        assert (tmp_path / FILENAMES[target]).exists()
    assert os.access(tmp_path / "torchrun.sh", os.X_OK)
    r = cli("--example", "vit-imagenet", "--to", "torchrun", "--out", str(tmp_path))
    assert r.exit_code == 2 and "exists" in r.stderr


@pytest.mark.parametrize("args,message", [
    (["--example", "vit-imagenet", "--to", "deepspeed", "--candidate", "9999"], "--candidate: the plan has"),
    (["--to", "deepspeed"], "give a project file or --example NAME"),
    (["--example", "llama3-70b-serving", "--to", "torchrun"], "training launcher"),
    (["--example", "no-such", "--to", "torchrun"], "unknown example"),
])
def test_cli_errors_are_one_line(cli: Any, args: list[str], message: str) -> None:
    r = cli(*args)
    assert r.exit_code == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""


def test_cli_accelerate_refusal_names_candidates_that_export(cli: Any, tmp_path: Path) -> None:
    proj = yaml.safe_load(example_path("llama3-8b-full-finetune").read_text())
    proj["workload"]["framework"] = "deepspeed"  # DeepSpeed runs pipelines: some candidates have them
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(proj))
    plan = api.plan(path)
    i = next(i for i, c in enumerate(plan.candidates) if c.layout.pp > 1)
    r = cli(str(path), "--to", "accelerate", "--candidate", str(i))
    assert r.exit_code == 2
    ok = re.search(r"candidates that export to accelerate: ([\d, ]+)", r.stderr)
    assert ok and all(plan.candidates[int(k)].layout.pp == 1 for k in ok.group(1).split(", "))


def test_cli_requires_a_target(cli: Any) -> None:
    r = cli("--example", "vit-imagenet")
    assert r.exit_code == 2 and "--to" in r.output
