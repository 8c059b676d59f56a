"""Positional and symbolic scores of every head of a pretrained Hugging Face RoPE LM."""
