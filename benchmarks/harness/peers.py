"""Peer models for the benchmarks: the same Transformer built from another library's layers.

`KerasHubTransformer` is an encoder-decoder Transformer of keras-hub layers at the size of one of
our `ModelConfig`s. `benchmarks.speed.decode` races its cached greedy and beam-4 generation
against our decoders, `benchmarks.speed.train_throughput` its training against ours;
`benchmarks.translation.multi30k` trains it beside our model on the same data, batches, loss,
optimizer and schedule, and scores its greedy and beam-4 translations. Import it with
`from benchmarks.harness.peers import KerasHubTransformer`.
"""

import warnings

import keras
import keras_hub
import numpy as np
from keras import ops

from keras_transformer.data.special_tokens import PAD_ID, START_ID


class KerasHubTransformer:
    """The peer: an encoder-decoder Transformer of keras-hub layers, with cached greedy generation.

    Source: `TokenAndPositionEmbedding` -> `TransformerEncoder` x N. Target:
    `TokenAndPositionEmbedding` -> `TransformerDecoder` x N (causal self-attention, attention
    over the encoder output, feed-forward) -> `Dense(V)`. Same D, H, F, N and V as `config`;
    keras-hub's positions are learned (ours are sinusoids), its LayerNorm comes after each residual
    as ours does. As in our model, the logits layer computes in float32 under mixed precision.

    `generate` follows keras-hub's BART (`BartSeq2SeqLM.generate_step` and `_build_cache`): the
    encoder runs once; one pass of the decoder blocks over `<s>` with
    `cross_attention_cache_update_index=0` projects the encoder output into every block's
    cross-attention keys and values once; then `GreedySampler` feeds one token per step, with each
    block's self-attention cache updated at the step's index and the cross-attention caches read
    as they are (`cross_attention_cache_update_index=None`). Unlike BART, the per-block caches
    stay separate tuples (BART stacks them into one tensor at every step) and the read-only
    tensors are captured by the loop instead of riding in its state.
    """

    def __init__(self, config):
        width, heads = config.d_model, config.num_heads
        block_args = dict(intermediate_dim=config.d_ff, num_heads=heads, dropout=config.dropout_rate)
        self.num_heads, self.head_width = heads, width // heads
        self.source_embedding = keras_hub.layers.TokenAndPositionEmbedding(
            config.source_vocab_size, config.max_source_len, width, name="hub_source_embedding"
        )
        self.target_embedding = keras_hub.layers.TokenAndPositionEmbedding(
            config.target_vocab_size, config.max_target_len, width, name="hub_target_embedding"
        )
        self.encoder_blocks = [
            keras_hub.layers.TransformerEncoder(**block_args, name=f"hub_encoder_{i}") for i in range(config.num_blocks)
        ]
        self.decoder_blocks = [
            keras_hub.layers.TransformerDecoder(**block_args, name=f"hub_decoder_{i}") for i in range(config.num_blocks)
        ]
        # Logits stay float32 under mixed precision, as ours do (a stable softmax and loss).
        self.output_projection = keras.layers.Dense(config.target_vocab_size, dtype="float32", name="hub_logits")
        source_ids = keras.Input(shape=(None,), dtype="int32", name="source_ids")
        target_in_ids = keras.Input(shape=(None,), dtype="int32", name="target_in_ids")
        memory, source_mask = self.encode(source_ids)
        hidden = self.target_embedding(target_in_ids)
        for block in self.decoder_blocks:
            hidden = block(hidden, memory, encoder_padding_mask=source_mask)
        # The whole model as one functional `keras.Model`: parameter count and the uncached check.
        self.model = keras.Model([source_ids, target_in_ids], self.output_projection(hidden), name="keras_hub_peer")

    def encode(self, source_ids):
        """Encode a batch: int `[B, S]` -> encoder output `[B, S, D]` and padding mask `[B, S]` (True = real)."""
        source_mask = ops.not_equal(source_ids, PAD_ID)
        hidden = self.source_embedding(source_ids)
        for block in self.encoder_blocks:
            hidden = block(hidden, padding_mask=source_mask, training=False)
        return hidden, source_mask

    def generate(self, source_ids, max_length, end_id=None, num_beams=1):
        """Greedy generation (`GreedySampler`), or beam search (`BeamSampler`) -> int32 `[B, max_length]`.

        With `end_id=None`, exactly `max_length` tokens per sentence. With an `end_id` (`</s>`),
        the loop stops once every sentence has produced it; what a sentence generates after its
        own `end_id` is left in place (detokenizing ignores everything from `</s>` on).
        `num_beams > 1` runs keras-hub's `BeamSampler`, which ranks hypotheses by their summed
        log-probabilities (no length penalty) and returns the best one; it repeats the prompt and
        the self-attention caches per beam, so the encoder output and the cross-attention caches
        that the steps read are repeated here to match.
        """
        source_ids = ops.cast(source_ids, "int32")
        batch, source_length = ops.shape(source_ids)[0], ops.shape(source_ids)[1]
        memory, source_mask = self.encode(source_ids)  # (B, S, D), (B, S)
        start = ops.full((batch, 1), START_ID, dtype="int32")
        self_caches, cross_caches = self._seed_caches(start, memory, source_mask, batch, max_length, source_length)

        if num_beams > 1:  # the sampler's rows are sentence-major, (B * beams, ...)
            memory, source_mask = (ops.repeat(t, num_beams, axis=0) for t in (memory, source_mask))
            cross_caches = [ops.repeat(cache, num_beams, axis=0) for cache in cross_caches]
        next_logits = self._cached_step(memory, source_mask, cross_caches, batch * num_beams)

        # prompt[:, 0] is <s> (kept: mask True); the sampler writes columns 1 .. L.
        prompt = ops.pad(start, ((0, 0), (0, max_length)))  # (B, L + 1)
        prompt_mask = ops.not_equal(prompt, PAD_ID)  # (B, L + 1): True at <s> only
        sampler = keras_hub.samplers.BeamSampler(num_beams) if num_beams > 1 else keras_hub.samplers.GreedySampler()
        prompt = sampler(
            next=next_logits,
            prompt=prompt,
            cache=tuple(self_caches),
            index=1,
            mask=prompt_mask,
            stop_token_ids=None if end_id is None else (end_id,),
        )
        return ops.cast(prompt[:, 1:], "int32")

    def _seed_caches(self, start, memory, source_mask, batch, max_length, source_length):
        """The decoder blocks on `<s>` at position 0: `(self_caches, cross_caches)`, one per block.

        Every cross-attention cache is filled here (update index 0), once; the self-attention
        caches hold position 0 in rows of `max_length`. No logits: only the caches are kept (the
        sampler's first step redoes position 0).
        """
        hidden = self.target_embedding(start, start_index=0)  # (B, 1, D)
        self_caches, cross_caches = [], []
        for block in self.decoder_blocks:
            hidden, self_cache, cross_cache = block(
                hidden,
                memory,
                encoder_padding_mask=source_mask,
                self_attention_cache=self._zero_cache(batch, max_length),  # (B, 2, L, H, K)
                self_attention_cache_update_index=0,
                cross_attention_cache=self._zero_cache(batch, source_length),  # (B, 2, S, H, K)
                cross_attention_cache_update_index=0,
                training=False,
            )
            self_caches.append(self_cache)
            cross_caches.append(cross_cache)
        return self_caches, cross_caches

    def _cached_step(self, memory, source_mask, cross_caches, rows):
        """The sampler's `next`: `(prompt, caches, index) -> (logits [R, V], hidden [R, D], caches)`.

        One token per step, at `index - 1`, through every block with its self-attention cache
        updated there and its cross-attention cache read as it is. `rows` is R, the batch times
        the beams; `memory`, `source_mask` and `cross_caches` are already repeated per beam.
        """

        def next_logits(prompt, caches, index):
            position = index - 1  # the step feeds the token at `position` and predicts the next one
            token = ops.slice(prompt, [0, position], [rows, 1])  # (B * beams, 1)
            hidden = self.target_embedding(token, start_index=position)  # (B, 1, D)
            new_caches = []
            for block, self_cache, cross_cache in zip(self.decoder_blocks, caches, cross_caches):
                hidden, self_cache, _ = block(
                    hidden,
                    memory,
                    encoder_padding_mask=source_mask,
                    self_attention_cache=self_cache,
                    self_attention_cache_update_index=position,
                    cross_attention_cache=cross_cache,
                    cross_attention_cache_update_index=None,
                    training=False,
                )
                new_caches.append(self_cache)
            logits = self.output_projection(hidden)[:, 0, :]  # (B, V)
            return logits, hidden[:, 0, :], tuple(new_caches)

        return next_logits

    def _zero_cache(self, batch, length):
        return ops.zeros((batch, 2, length, self.num_heads, self.head_width), dtype=self.model.compute_dtype)

    def generate_uncached(self, source_ids, max_length):
        """The reference: the whole model on the whole prefix at every step, argmax of its last position's logits.

        The prefix is padded to one length, `max_length` (the causal self-attention keeps the padding
        after it from its logits), so every step runs the model on the same shapes: on JAX, each op
        compiles once rather than once per step.
        """
        tokens = np.full((len(source_ids), max_length + 1), PAD_ID, dtype="int32")
        tokens[:, 0] = START_ID
        for step in range(max_length):
            with warnings.catch_warnings():  # Keras warns of the softmax over one key at the first step
                warnings.filterwarnings("ignore", message="You are using a softmax over axis", category=UserWarning)
                logits = self.model([source_ids, tokens[:, :max_length]], training=False)  # (B, max_length, V)
            tokens[:, step + 1] = np.argmax(ops.convert_to_numpy(logits[:, step, :]), axis=-1)
        return tokens[:, 1:]
