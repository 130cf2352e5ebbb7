"""Run one vLLM engine on a tiny checkpoint and print a JSON report (one process per engine:
plugins load once per process and their env is read then).

``python -m tests.integrations.run_engine MODEL_DIR [--tp N] [--errors]``; the environment
chooses the configuration (FUSED_QUANT_VLLM_KERNEL, FUSED_QUANT_VLLM_FUSION, VLLM_PLUGINS).
"""

from __future__ import annotations

import argparse
import functools
import json
import os

PROMPTS = ([1, 5, 9, 33, 100, 7], [1, 200, 17, 4], [3] * 11)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--errors", action="store_true")
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB per worker: the model needs almost none
    if args.tp == 1:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    import torch

    # vLLM's CPU kernels for AMX tiles take bf16 / fp16 activations only (the stock-kernel comparison runs float32),
    # and on a CPU that has AMX where the sandbox gives no tile state they die with SIGILL: the engines here take
    # vLLM's other CPU paths (oneDNN) on every machine, which is what these tests compare our kernel against
    torch.cpu._is_amx_tile_supported = lambda: False
    from vllm import LLM, SamplingParams

    from tests.integrations import tiny_llama as tl

    llm = LLM(model=args.model, dtype=args.dtype, skip_tokenizer_init=True, enforce_eager=True,
              max_model_len=256, tensor_parallel_size=args.tp)
    llm.apply_model(tl.reset_fusion_counts)
    params = SamplingParams(max_tokens=12, temperature=0, ignore_eos=True, logprobs=2)
    outs = llm.generate([{"prompt_token_ids": p} for p in PROMPTS], params, use_tqdm=False)
    report = {
        "tokens": [list(o.outputs[0].token_ids) for o in outs],
        "logprobs": [[{str(t): lp.logprob for t, lp in step.items()} for step in o.outputs[0].logprobs]
                     for o in outs],
        "kernels": llm.apply_model(tl.kernel_names),
        "fusion_counts": llm.apply_model(tl.fusion_counts),
    }
    if args.errors:
        report["layer_errors"] = llm.apply_model(
            functools.partial(tl.layer_errors, checkpoint=os.path.join(args.model, "model.safetensors")))
    print("REPORT " + json.dumps(report))


if __name__ == "__main__":
    main()
