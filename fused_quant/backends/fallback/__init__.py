"""The ``torch`` backend: the spec in pure torch on every device (never Triton); the fallback of every other backend."""
