"""The error boundary, case by case (the cases the fuzz run found, issue 16): each bad file ends in gpuplan's own
error naming the field, never a Python exception, and the CLI never prints a traceback or an Infinity."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.catalog.hardware import load_catalog
from gpuplan.catalog.loader import load_project, parse_project, resolve_model
from gpuplan.catalog.prices import load_prices
from gpuplan.core.sizing.lora import check_targets
from gpuplan.errors import CatalogError, InputError, InternalError, UnsupportedModelError
from gpuplan.report.strict_json import dumps
from gpuplan.schema.project import ModelRef
from tests.conftest import hf_config

BASE = "name: x\nmodel: {preset: llama-3.1-8b}\nworkload: {task: qlora, micro_batch_size: 1}\n"


def project_error(tmp_path: Path, text: str | bytes, suffix: str = ".yaml") -> InputError:
    path = tmp_path / f"p{suffix}"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    with pytest.raises(InputError) as info:
        api.plan(path)
    return info.value


@pytest.mark.parametrize("text,suffix,loc,words", [
    ("[" * 5000 + "]" * 5000, ".yaml", (), "nested"),
    ('{"a": ' * 3000 + "1" + "}" * 3000, ".json", (), "nested"),
    (BASE.replace("micro_batch_size: 1", "micro_batch_size: " + "9" * 5000), ".yaml", (), "digits"),
    (BASE.replace("micro_batch_size: 1", "micro_batch_size: " + "9" * 400), ".yaml", ("workload", "micro_batch_size"),
     "out of range"),
    (BASE.replace("micro_batch_size: 1", "micro_batch_size: 1000000000000"), ".yaml",
     ("workload", "micro_batch_size"), "less than or equal to 1000000"),
    (BASE.replace("micro_batch_size: 1", "tokens: 1.0e+300"), ".yaml", ("workload", "tokens"), "less than or equal"),
    (BASE + "growth: {model_scale: 1e307}\n", ".yaml", ("growth", "model_scale"), "less than or equal to 1000"),
    (BASE.replace("micro_batch_size: 1", "tokens: .nan"), ".yaml", ("workload", "tokens"), "finite"),
    (BASE.replace("micro_batch_size: 1", "micro_batch_size: yes"), ".yaml", ("workload", "micro_batch_size"),
     "not true"),
    (BASE + "name: again\n", ".yaml", (), "'name' is given twice"),
    ('{"name": "a", "name": "b"}', ".json", (), "'name' is given twice"),
    (b"name: caf\xe9\n" + BASE.encode(), ".yaml", (), "not UTF-8"),
])
def test_bad_project_files_end_in_an_input_error(tmp_path: Path, text: str, suffix: str, loc: tuple[str, ...],
                                                 words: str) -> None:
    err = project_error(tmp_path, text, suffix)
    assert words in str(err) and err.loc == loc, str(err)
    assert len(str(err)) < 600


def test_a_long_value_is_echoed_cut(tmp_path: Path) -> None:
    err = project_error(tmp_path, BASE.replace("name: x", "name: " + "x" * 10_000))
    assert err.loc == ("name",) and "x" * 201 not in str(err) and "10,000 characters" in str(err)
    err = project_error(tmp_path, BASE.replace("model: {preset: llama-3.1-8b}",
                                               "model: {preset: " + "y" * 20_000 + "}"))
    assert "y" * 201 not in str(err)


@pytest.mark.parametrize("change,loc,words", [
    ({"num_attention_heads": 0}, ["num_attention_heads"], "greater than 0"),
    ({"attention_dropout": "abc"}, ["attention_dropout"], "probability"),
    ({"hidden_size": 10**9}, ["hidden_size"], "less than or equal"),
    ({"num_hidden_layers": "32"}, ["num_hidden_layers"], "must be an integer"),
])
def test_bad_inline_config_values_name_the_key(change: dict, loc: list[str], words: str) -> None:
    config = {**hf_config("llama-3-8b"), **change}
    with pytest.raises(InputError) as info:
        resolve_model(parse_project({"model": {"config": config}, "workload": {"task": "inference"}}).model)
    assert info.value.loc == ("model", "config", *loc) and words in str(info.value), str(info.value)


def test_moe_layer_lists_are_checked() -> None:
    config = {**hf_config("qwen3-235b-a22b"), "mlp_only_layers": [{"a": 1}]}
    with pytest.raises(InputError, match="mlp_only_layers: must be a list of integers"):
        resolve_model(ModelRef(config=config))


def test_a_list_as_model_type_and_a_number_as_resnet_depths() -> None:
    with pytest.raises(UnsupportedModelError, match="unsupported model_type"):
        resolve_model(ModelRef(config={"model_type": ["llama"]}))
    with pytest.raises(InputError, match="depths: must be a list of integers"):
        resolve_model(ModelRef(config={"model_type": "resnet", "depths": 3}))


def test_an_unknown_lora_target_is_refused_with_the_models_names() -> None:
    with pytest.raises(InputError, match="did you mean 'q_proj'") as info:
        parse_project({"model": {"preset": "llama-3.1-8b"},
                       "workload": {"task": "lora", "lora": {"targets": ["q_prj"]}}})
    assert info.value.loc == ("workload", "lora", "targets", 0)
    bert = resolve_model(ModelRef(preset="bert-base-uncased")).arch
    with pytest.raises(InputError, match="the bert model has no linear layer named 'q_proj'"):
        check_targets(bert, ["q_proj"])
    check_targets(bert, ["query", "value"])
    check_targets(resolve_model(ModelRef(preset="falcon-7b")).arch, ["q_proj", "query_key_value"])


def _gpu_row() -> str:
    return ('schema_version = 1\n[[gpu]]\nid = "mine"\nname = "Mine"\nvendor = "nvidia"\ngeneration = "hopper"\n'
            'market_class = "datacenter"\nlaunch_date = 2023-01-01\nmemory_gib = MEM\n')


@pytest.mark.parametrize("text,words", [
    (_gpu_row().replace("MEM", "nan"), "finite"),
    (_gpu_row().replace("MEM", "9" * 5000), "digits"),
    (_gpu_row().replace("MEM", "80").replace("Mine", "M\xe9ine").encode("latin-1"), "not UTF-8"),
    ("schema_version = 1\n" + '[[gpu]]\nid = "x"\n' * 2001, "2,001 rows"),
])
def test_bad_catalog_files_end_in_a_catalog_error(tmp_path: Path, text: str | bytes, words: str) -> None:
    path = tmp_path / "mine.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    with pytest.raises(CatalogError, match=words) as info:
        load_catalog([path])
    assert str(path) in str(info.value)
    if words == "finite":
        assert info.value.field == "memory_gib" and info.value.row == "mine"


CSV_HEAD = "table,gpu_id,provider,price_per_gpu_hour,source,as_of"
CSV_ROW = "cloud,h100-sxm-80gb,Mine,PRICE,my quote,2026-01-01"


@pytest.mark.parametrize("text,words", [
    (CSV_HEAD + ",price_per_gpu_hr\n" + CSV_ROW.replace("PRICE", "2") + ",3\n", "did you mean 'price_per_gpu_hour'"),
    (CSV_HEAD + ",colour\n" + CSV_ROW.replace("PRICE", "2") + ",red\n", "unknown column 'colour'"),
    (CSV_HEAD + "\n" + CSV_ROW.replace("PRICE", "2") + ",extra\n", "more cell"),
    (CSV_HEAD + "\n" + CSV_ROW.replace("PRICE", "nan") + "\n", "finite"),
    ((CSV_HEAD + "\n" + CSV_ROW.replace("PRICE", "2").replace("Mine", "M\xe9") + "\n").encode("latin-1"), "not UTF-8"),
    (CSV_HEAD + "\n" + (CSV_ROW.replace("PRICE", "2") + "\n") * 2001, "more than 2,000 rows"),
])
def test_bad_price_files_end_in_a_catalog_error(tmp_path: Path, text: str | bytes, words: str) -> None:
    path = tmp_path / "quotes.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    with pytest.raises(CatalogError, match=words):
        load_prices([path])


def test_a_valid_csv_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "quotes.csv"
    path.write_text(CSV_HEAD + ",\n" + CSV_ROW.replace("PRICE", "2.5") + ",\n")
    assert [p.price_per_gpu_hour for p in load_prices([path]).cloud if p.provider == "Mine"] == [2.5]


def test_strict_json_refuses_infinity() -> None:
    with pytest.raises(InternalError, match=r"candidates\[1\]\.score is inf"):
        dumps({"candidates": [{"score": 1.0}, {"score": float("inf")}]})
    assert dumps({"a": 1.5}) == '{"a": 1.5}'


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuplan", *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_plan_out_refuses_a_missing_folder_a_folder_and_a_dangling_link(tmp_path: Path) -> None:
    target = tmp_path / "nowhere" / "report.md"
    link = tmp_path / "link.md"
    link.symlink_to(tmp_path / "gone.md")
    for out, words in ((target, "does not exist (create it first)"), (tmp_path, "is a folder"),
                       (link, "link to a file that does not exist")):
        r = cli("plan", "--example", "vit-imagenet", "--format", "md", "--out", str(out))
        assert r.returncode == 2 and "Traceback" not in r.stderr and words in r.stderr, r.stderr
    assert not (tmp_path / "gone.md").exists()
    r = cli("plan", "--example", "vit-imagenet", "--format", "md", "--out", str(tmp_path / "ok.md"))
    assert r.returncode == 0 and (tmp_path / "ok.md").read_text().startswith("#")


@pytest.mark.parametrize(("args", "words"), [
    (("export", "--example", "vit-imagenet"), "--to: give the launcher to write with --to (allowed: accelerate"),
    (("fit", "--example", "vit-imagenet"), "--gpu: give the GPU to fit on with --gpu"),
])
def test_an_option_a_command_needs_is_asked_for_by_name(args: tuple[str, ...], words: str) -> None:
    """`export --to` and `fit --gpu` are optional to click (so that `--list-examples` runs alone) and required by
    the command: left out, the user reads which option and what it takes, exit code 2, no traceback."""
    r = cli(*args)
    text = " ".join(r.stderr.split())
    assert r.returncode == 2 and words in text and "Traceback" not in text, r.stderr




@pytest.mark.parametrize(("args", "words"), [
    (("plan", "--example", "vit-imagenet", "--objective", "bogus"), "'bogus' is not one of 'cost', 'time'"),
    (("plan", "--no-such-option"), "No such option: --no-such-option"),
    (("no-such-command",), "No such command 'no-such-command'"),
    (("export", "--example", "vit-imagenet", "--to", "slurm"), "'slurm' is not one of"),
    (("plan", "--example", "vit-imagenet", "--top", "0"), "greater than or equal to 1"),
])
def test_a_command_line_that_does_not_parse_is_a_usage_error(args: tuple[str, ...], words: str) -> None:
    """Click's usage errors pass the app's boundary as they are: exit code 2 and click's message, not the internal
    error (typer 0.29 runs on its own copy of click, whose exceptions are not the `click` package's)."""
    r = cli(*args)
    assert r.returncode == 2, r.stderr
    text = " ".join(r.stderr.replace("\u2502", " ").split())  # click's box, unwrapped
    assert words in text and "internal error" not in text and "Traceback" not in text
    assert text.startswith("Usage: ") and "gpuplan" in text.splitlines()[0]


def test_an_unexpected_exception_is_the_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuplan.cli import app
    from gpuplan.cli.common import state

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("division by zero " + "z" * 1000)

    monkeypatch.setattr(api, "plan", broken)
    # `--debug` below sets the CLI's module state for the process: restored after the test, so that the tests that
    # run after it in the same process see the one-line errors again
    monkeypatch.setattr(state, "debug", False)
    r = CliRunner().invoke(app, ["plan", "--example", "vit-imagenet", "--format", "json"])
    assert r.exit_code == 3, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: internal error: ZeroDivisionError: division by zero")
    assert "z" * 201 not in r.output and "--debug" in r.output
    r = CliRunner().invoke(app, ["--debug", "plan", "--example", "vit-imagenet"])
    assert isinstance(r.exception, ZeroDivisionError)  # --debug keeps the traceback


def test_json_output_of_the_examples_is_strict() -> None:
    r = cli("plan", "--example", "llama3-8b-qlora", "--format", "json", "--top", "100")
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout, parse_constant=lambda name: pytest.fail(f"{name} in the JSON output"))


def test_valid_files_keep_loading(tmp_path: Path) -> None:
    """The new checks keep ordinary projects valid: a byte-order mark, 4.0 for an integer, a YAML merge key."""
    path = tmp_path / "p.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + BASE.replace("micro_batch_size: 1", "micro_batch_size: 4.0").encode())
    assert load_project(path)[0].workload.micro_batch_size == 4
    path.write_text("name: x\nmodel: {preset: llama-3.1-8b}\nworkload:\n  <<: {task: qlora, micro_batch_size: 1}\n"
                    "  micro_batch_size: 2\n")
    assert load_project(path)[0].workload.micro_batch_size == 2


def test_a_catalog_or_price_row_refuses_a_yaml_boolean_as_a_number(tmp_path: Path) -> None:
    """`memory_gib: yes` in a catalog row, `price_per_gpu_hour: on` in a price row: refused by field, not read as 1."""
    from gpuplan.catalog.hardware import load_catalog
    from gpuplan.catalog.prices import load_prices
    from gpuplan.errors import CatalogError

    cat = tmp_path / "gpu.yaml"
    cat.write_text("gpu:\n  - {id: my-gpu, name: Mine, source: me, as_of: 2026-01-01, memory_gib: yes}\n")
    with pytest.raises(CatalogError, match="memory_gib: must be a number"):
        load_catalog([cat])
    prices = tmp_path / "p.yaml"
    prices.write_text("cloud:\n  - {gpu_id: h100-sxm-80gb, provider: x, price_per_gpu_hour: on, source: me, "
                      "as_of: 2026-01-01}\n")
    with pytest.raises(CatalogError, match="price_per_gpu_hour: must be a number"):
        load_prices([prices])
