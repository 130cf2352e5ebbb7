"""Device kernels. ``kernels.triton`` holds Triton JIT code only; importing this package imports nothing heavy."""
