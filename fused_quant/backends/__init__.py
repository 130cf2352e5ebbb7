"""One folder per backend: ``fallback/`` (the ``torch`` backend), ``triton_fp8/``, ``hip_w8a8/``.

A folder's ``producers`` and ``gemms`` modules register its producers and GEMM providers
(whatever the platform; availability is decided at lookup). What each backend serves is one
row of the backend table, ``fused_quant.selection.BACKENDS``.
"""
