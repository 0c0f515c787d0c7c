"""Adapters that plug flashkit into other libraries (each imports its library on first use):
flashkit.integrations.transformers registers flashkit as a transformers attention backend."""
