"""Decoding token ids from a trained model.

`translation`: greedy decoding and beam search for the encoder-decoder, with or without a
key/value cache (the tutorial's loop is `greedy_decode(..., use_cache=False)`).
`generation`: continuing prompts with a decoder-only language model, a key/value cache and
keras-hub's samplers (imported on its own, as `keras_transformer.decoding.generation`, since it
imports keras-hub).

Decoding works on ids; the tokenizers that make them live in `keras_transformer.data`.
"""

from keras_transformer.decoding.translation import IMPOSSIBLE, beam_search, forbid_never_emitted, greedy_decode

__all__ = ["IMPOSSIBLE", "beam_search", "forbid_never_emitted", "greedy_decode"]
