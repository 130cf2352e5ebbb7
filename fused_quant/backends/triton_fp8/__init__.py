"""The ``triton_fp8`` backend: Triton producers and FP8 / int8 GEMMs on CUDA SM90+."""
