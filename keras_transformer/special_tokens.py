"""The reserved tokens every vocabulary starts with, and their ids.

Plain constants without TensorFlow, so that the backend-neutral modules (layers, model, training,
decoding) run under any Keras backend; `keras_transformer.data.tokenizers` re-exports them.
"""

RESERVED_TOKENS = ("<pad>", "<unk>", "<s>", "</s>")
PAD_ID, UNK_ID, START_ID, END_ID = 0, 1, 2, 3
