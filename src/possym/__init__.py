"""possym: positional versus symbolic attention heads in RoPE Transformers."""

__version__ = "0.1.0"
