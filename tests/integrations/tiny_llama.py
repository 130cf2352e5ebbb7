"""A tiny random Llama in compressed-tensors W8A8 int8 format, written locally (no downloads), and
the functions the engine tests run inside vLLM's workers (``LLM.apply_model`` needs them importable)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

HIDDEN, INTERMEDIATE, LAYERS, HEADS, KV_HEADS, VOCAB = 128, 256, 2, 4, 2, 512
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def _quantization_config() -> dict:
    from compressed_tensors.quantization import QuantizationConfig, preset_name_to_scheme

    cfg = QuantizationConfig(config_groups={"group_0": preset_name_to_scheme("W8A8", ["Linear"])},
                             ignore=["lm_head"], format="int-quantized", quantization_status="compressed")
    return cfg.model_dump(exclude_none=True) | {"quant_method": "compressed-tensors"}


def write_tiny_llama(path: Path, *, wmax: int = 127, seed: int = 0, zero_row_sums: bool = False) -> Path:
    """Write config.json + model.safetensors; int8 weights drawn uniformly from [-wmax, wmax].

    ``zero_row_sums``: every weight row sums to 0 (each value appears with its negation). vLLM's
    CPU int8 kernel quantizes activations as unsigned with a +128 zero point and subtracts
    ``128 * scale * sum(w_row)`` in fp32 afterwards; zero sums make that correction exactly 0,
    so a comparison with it measures the GEMM itself rather than that cancellation.
    """
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(seed)
    head_dim = HIDDEN // HEADS
    shapes = {"self_attn.q_proj": (HIDDEN, HIDDEN), "self_attn.k_proj": (KV_HEADS * head_dim, HIDDEN),
              "self_attn.v_proj": (KV_HEADS * head_dim, HIDDEN), "self_attn.o_proj": (HIDDEN, HIDDEN),
              "mlp.gate_proj": (INTERMEDIATE, HIDDEN), "mlp.up_proj": (INTERMEDIATE, HIDDEN),
              "mlp.down_proj": (HIDDEN, INTERMEDIATE)}
    tensors = {"model.embed_tokens.weight": (torch.randn(VOCAB, HIDDEN, generator=g) * 0.5).to(torch.bfloat16),
               "model.norm.weight": torch.ones(HIDDEN, dtype=torch.bfloat16),
               "lm_head.weight": (torch.randn(VOCAB, HIDDEN, generator=g) * 0.6).to(torch.bfloat16)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        tensors[p + "input_layernorm.weight"] = torch.ones(HIDDEN, dtype=torch.bfloat16)
        tensors[p + "post_attention_layernorm.weight"] = torch.ones(HIDDEN, dtype=torch.bfloat16)
        for name in LINEARS:
            n, k = shapes[name]
            if zero_row_sums:
                half = torch.randint(-wmax, wmax + 1, (n, k // 2), generator=g, dtype=torch.int8)
                w = torch.cat([half, -half], dim=1)[:, torch.randperm(k, generator=g)]
            else:
                w = torch.randint(-wmax, wmax + 1, (n, k), generator=g, dtype=torch.int8)
            tensors[p + name + ".weight"] = w
            # scale so each output has unit-ish variance: |w| ~ wmax / sqrt(3), K terms
            scale = torch.full((n, 1), 1.0 / (wmax * (k / 3) ** 0.5), dtype=torch.float32)
            tensors[p + name + ".weight_scale"] = scale * (1 + 0.1 * torch.rand(n, 1, generator=g))
    path.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path / "model.safetensors"))
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "vocab_size": VOCAB, "max_position_embeddings": 256,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2,
        "quantization_config": _quantization_config(),
    }
    (path / "config.json").write_text(json.dumps(config, indent=1))
    return path


# ---- run inside the workers through LLM.apply_model -------------------------------------------


def kernel_names(model: torch.nn.Module) -> dict[str, str]:
    """Linear layer prefix -> name of the int8 kernel vLLM chose for it."""
    out = {}
    for name, module in model.named_modules():
        scheme = getattr(module, "scheme", None)
        kernel = getattr(scheme, "kernel", None)
        if kernel is not None:
            out[name] = type(kernel).__name__
    return out


def fusion_counts(model: torch.nn.Module) -> dict[str, int]:
    from fused_quant.registry import fusion_counts as counts

    return {"/".join(k): v for k, v in counts().items()}


def reset_fusion_counts(model: torch.nn.Module) -> None:
    from fused_quant.registry import reset_fusion_counts as reset

    reset()


def layer_errors(model: torch.nn.Module, checkpoint: str) -> dict[str, float]:
    """Per o_proj / down_proj: max |out - float64 reference| in bf16 steps of the reference.

    The reference is the float64 GEMM of the spec's int8 activation (fused_quant.reference) with
    the checkpoint's own int8 weights and scales, so only the GEMM and its epilogue are measured.
    """
    from safetensors.torch import load_file

    from fused_quant import keys as K
    from fused_quant.reference import quant_ref

    tensors = load_file(checkpoint)
    g = torch.Generator().manual_seed(0)
    errors = {}
    for name, module in model.named_modules():
        if not name.endswith(("self_attn.o_proj", "mlp.down_proj")):
            continue
        w = tensors[name + ".weight"].double()
        ws = tensors[name + ".weight_scale"].double().reshape(1, -1)
        x = (torch.randn(9, w.shape[1], generator=g) * 2).to(torch.bfloat16)
        device = next(iter([*module.parameters(), *module.buffers()])).device
        out = module(x.to(device))
        out = (out[0] if isinstance(out, tuple) else out).double().cpu()
        xq, xs = quant_ref(x, K.kInt8DynamicTokenSym)
        ref = (xq.double() @ w.T) * xs.double() * ws
        step = torch.exp2(torch.floor(torch.log2(ref.abs().clamp_min(2.0**-100))) - 7)  # bf16 spacing at |ref|
        errors[name] = float(((out - ref).abs() / step).max())
    return errors
