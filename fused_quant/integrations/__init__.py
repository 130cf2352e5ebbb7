"""Integrations with serving engines; each is imported only by that engine (never by ``fused_quant``)."""
