"""Tests that run on every Keras backend: TensorFlow, JAX and PyTorch (see `tests/test_backends.py`)."""
