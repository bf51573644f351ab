"""Readers of corpus formats, one module per format, each yielding (source, target) pairs."""
