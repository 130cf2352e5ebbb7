"""``benchmarks/models.py``: the linears and MLP widths of a decoder from its Hugging Face config, on one GPU of
``--tp``; every config it cannot read is refused naming the field and the value; ``fused-quant bench``, the sweep and
``quantizing_calls`` take ``--model`` / ``--tp`` and time those shapes."""

from __future__ import annotations

import json
import os

import pytest
import torch

from fused_quant import cli

from benchmarks import models
from tests.cli_fixtures import record_benchmarks

QWEN_2_5_7B = {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584, "intermediate_size": 18944,
               "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064}


def test_llama_3_8b_is_the_default_and_its_shapes_are_the_known_ones():
    m = models.default()
    assert m.shapes == {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
    assert (m.d, m.h, m.name) == (4096, 14336, "Llama-3-8B")


def test_a_config_without_head_dim_takes_hidden_over_heads():
    m = models.of_config(QWEN_2_5_7B, "qwen")
    # (28 heads + 2 x 4 kv heads) x 128
    assert m.shapes == {"qkv": (4608, 3584), "o": (3584, 3584), "gate_up": (37888, 3584), "down": (3584, 18944)}
    assert (m.d, m.h) == (3584, 18944)
    assert models.of_config({**QWEN_2_5_7B, "head_dim": None}, "qwen") == m


def test_tensor_parallel_shapes_are_one_gpus_share():
    m = models.default(tp=2)
    assert m.shapes == {"qkv": (3072, 4096), "o": (4096, 2048), "gate_up": (14336, 4096), "down": (4096, 7168)}
    assert (m.d, m.h, m.name) == (4096, 7168, "Llama-3-8B, tp=2")
    # 8 kv heads over 16 GPUs: one each (replicated), beside 2 query heads
    assert models.default(tp=16).shapes["qkv"] == ((2 + 2) * 128, 4096)


def test_a_multimodal_config_gives_its_text_part():
    nested = {"architectures": ["X"], "vision_config": {"hidden_size": 1152}, "text_config": models.LLAMA_3_8B}
    assert models.of_config(nested, "Llama-3-8B") == models.default()


@pytest.mark.parametrize("config,tp,message", [
    ({"hidden_size": 4096}, 1, "no intermediate_size, num_attention_heads"),
    ({**models.LLAMA_3_8B, "hidden_size": 0}, 1, "hidden_size must be a positive integer, got 0"),
    ({**models.LLAMA_3_8B, "intermediate_size": True}, 1, "intermediate_size must be a positive integer, got True"),
    ({**models.LLAMA_3_8B, "num_attention_heads": "32"}, 1, "num_attention_heads must be a positive integer, got '32'"),
    ({**models.LLAMA_3_8B, "num_key_value_heads": 5}, 1, "num_attention_heads 32 is not a multiple of "
                                                        "num_key_value_heads 5"),
    ({**models.LLAMA_3_8B, "head_dim": None, "hidden_size": 4000, "num_attention_heads": 48}, 1,
     "no head_dim, and hidden_size 4000 is not a multiple of num_attention_heads 48"),
    (models.LLAMA_3_8B, 3, "num_attention_heads 32 does not split over tp=3 GPUs"),
    ({**models.LLAMA_3_8B, "num_key_value_heads": 4, "num_attention_heads": 24, "intermediate_size": 14400}, 6,
     "num_key_value_heads 4 neither splits over tp=6 GPUs nor divides it"),
    ({**models.LLAMA_3_8B, "num_local_experts": 8}, 1, "a mixture-of-experts config (num_local_experts=8)"),
    ({**QWEN_2_5_7B, "moe_intermediate_size": 1408, "num_experts": 60}, 1, "num_experts=60, moe_intermediate_size=1408"),
    ([1, 2], 1, "expected a JSON object of a model's config, got list"),
    (models.LLAMA_3_8B, 0, "tp must be a positive integer, got 0"),
])
def test_configs_it_cannot_read_are_refused_by_field_and_value(config, tp, message):
    with pytest.raises(ValueError, match="^m: ") as exc:
        models.of_config(config, "m", tp)
    assert message in str(exc.value)


def test_read_takes_a_config_file_or_its_folder_and_names_what_it_missed(tmp_path):
    folder = tmp_path / "Qwen2.5-7B"
    folder.mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json in that folder"):
        models.read(folder)
    (folder / "config.json").write_text(json.dumps(QWEN_2_5_7B))
    assert models.read(folder) == models.read(folder / "config.json") == models.of_config(QWEN_2_5_7B, "Qwen2.5-7B")
    assert models.read(folder, tp=2).name == "Qwen2.5-7B, tp=2"
    (tmp_path / "qwen2-7b.json").write_text(json.dumps(QWEN_2_5_7B))
    assert models.read(tmp_path / "qwen2-7b.json").name == "qwen2-7b"
    with pytest.raises(FileNotFoundError, match="no such file"):
        models.read(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{hidden_size: 1")
    with pytest.raises(ValueError, match="not a JSON file"):
        models.read(tmp_path / "bad.json")
    (tmp_path / "deep.json").write_text("[" * 200_000 + "]" * 200_000)  # valid JSON nested past Python's stack
    with pytest.raises(ValueError, match="deep.json: not a JSON file \\(RecursionError"):
        models.read(tmp_path / "deep.json")


def _config(tmp_path, config=QWEN_2_5_7B) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


def test_bench_passes_the_model_to_every_benchmark(tmp_path, monkeypatch, capsys):
    seen = record_benchmarks(monkeypatch)
    assert cli.main(["bench", "all", "--model", _config(tmp_path), "--tp", "2", "--out", str(tmp_path / "a")]) == 0
    qwen = models.of_config(QWEN_2_5_7B, tmp_path.name, 2)
    assert seen == {"bench_act_quant": {"h": 9472}, "bench_gemm": {"model": qwen}, "bench_host": {"model": qwen},
                    "bench_mlp": {"model": qwen}}
    assert "qkv 2304x3584, o 3584x1792, gate_up 18944x3584, down 3584x9472; MLP 3584 x 9472" in capsys.readouterr().out
    seen.clear()  # without --model each benchmark keeps its own default (Llama-3-8B)
    assert cli.main(["bench", "gemm", "--out", str(tmp_path / "b")]) == 0
    assert seen == {"bench_gemm": {}}


@pytest.mark.parametrize("argv,message", [
    (["--model", "{missing}"], "no such file"),
    (["--model", ""], "--model is empty"),  # not Llama-3-8B's shapes in silence
    (["--model", "{fifo}"], "not a regular file"),
    (["--model", "{config}", "--tp", "3"], "num_attention_heads 28 does not split over tp=3 GPUs"),
])
def test_bench_refuses_a_model_it_cannot_read_before_anything_runs(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a path that is there but no file to read a config of (reading it would block)
    argv = [a.format(missing=tmp_path / "nope.json", config=_config(tmp_path), fifo=fifo) for a in argv]
    assert cli.main(["bench", "gemm", *argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("tp", ["0", "-2", "two", "1.5"])
def test_tp_takes_a_whole_number_of_gpus(tp, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:  # argparse's usage error, naming the flag
        cli.main(["bench", "gemm", "--tp", tp, "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    assert f"argument --tp: expected a whole number of GPUs >= 1, got '{tp}'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_sweep_and_the_quantizing_calls_take_a_model(tmp_path, capsys):
    from benchmarks import quantizing_calls
    from benchmarks.sweep_small_m_gemm import parse_args

    args, _, shapes, _ = parse_args(["--out", "x", "--model", _config(tmp_path), "--shapes", "down,qkv"])
    assert shapes == ["down", "qkv"] and args.decoder.shapes["down"] == (3584, 18944)
    for main, argv in ((lambda a: parse_args(a), ["--out", "x", "--model", str(tmp_path / "nope")]),
                       (quantizing_calls.main, ["--out", str(tmp_path / "q"), "--model", str(tmp_path / "nope")]),
                       (quantizing_calls.main, ["--out", str(tmp_path / "q"), "--shapes", "lm_head"])):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("no such file") == 2 and "--shapes takes names of qkv, o, gate_up, down, got lm_head" in err
    assert not (tmp_path / "q").exists()


def test_plot_gemm_draws_the_models_own_shapes(tmp_path):
    from benchmarks import decode

    if decode.pyplot() is None:
        pytest.skip("matplotlib is not installed")
    rows = [{"shape": label, "kind": kind, "M": m, "N": n, "K": k, "weight_TBps": {"ours": 1.0 + m / 16},
             "copy_same_bytes_us": 10.0}
            for label, (n, k) in models.of_config(QWEN_2_5_7B, "q").shapes.items()
            for kind in ("fp8", "int8") for m in (1, 16)]
    assert decode.plot_gemm({"ceiling_GBps": 3000.0, "rows": rows}, str(tmp_path / "g.png"))
    assert (tmp_path / "g.png").stat().st_size > 0


def test_unswept_names_the_linears_the_table_holds_no_row_of(tmp_path):
    from benchmarks import decode

    qwen = models.of_config(QWEN_2_5_7B, "qwen")
    assert decode.unswept(models.default(), "sm_90") == []  # the committed table's shapes
    assert decode.unswept(qwen, "sm_90") == ["qkv", "o", "gate_up", "down"]
    assert decode.unswept(models.default(), "sm_100") == ["qkv", "o", "gate_up", "down"]  # no rows for that arch
    table = tmp_path / "t.json"  # Qwen's o swept (one kind, one bucket), on sm_90 only
    row = dict(arch="sm_90", kind="int8", shape="o", n=3584, k=3584, m=1, BLOCK_N=1, BLOCK_M=1, BLOCK_K=256,
               splits=1, num_warps=1, num_stages=1, us=5.8, torch_us=11.6, torch="triton_int8")
    table.write_text(json.dumps({"metas": {"sm_90": {}}, "rows": [row]}))
    assert decode.unswept(qwen, "sm_90", table) == ["qkv", "gate_up", "down"]
    assert decode.unswept(qwen, "sm_100", table) == ["qkv", "o", "gate_up", "down"]


@pytest.mark.parametrize("ms, said", [("3", "got '3'"), ("16,x", "got 'x' in '16,x'"), ("", "got ''")])
def test_the_sweep_takes_only_the_token_counts_of_the_buckets(ms, said, capsys):
    """A row at a token count off gemm_launch's buckets is never read, so the sweep refuses it as the other scripts
    refuse theirs: one line naming the buckets and what came."""
    from benchmarks.sweep_small_m_gemm import parse_args
    from fused_quant.kernels.gemm_launch import M_BUCKETS

    assert parse_args(["--out", "x", "--ms", "16,1,16"])[3] == [16, 1]
    with pytest.raises(SystemExit) as exc:
        parse_args(["--out", "x", "--ms", ms])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    assert f"--ms: expected token counts >= 1 separated by commas, each one of {', '.join(map(str, M_BUCKETS))}, " \
           f"{said}" in err
