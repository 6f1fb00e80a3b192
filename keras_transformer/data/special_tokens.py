"""The reserved tokens every vocabulary starts with, and their ids.

Plain constants without TensorFlow, so that the backend-neutral modules (layers, model, training,
decoding) run under any Keras backend; `keras_transformer.data.tokenizers` re-exports them.

Every vocabulary starts with `RESERVED_TOKENS` (ids 0..3). A language-model vocabulary adds the
mask token right after them (`LM_RESERVED_TOKENS`, `<mask>` at id 4), so the ids of the first
four are the same in every vocabulary; translation vocabularies have no mask token.
"""

RESERVED_TOKENS = ("<pad>", "<unk>", "<s>", "</s>")
PAD_ID, UNK_ID, START_ID, END_ID = 0, 1, 2, 3

MASK_TOKEN = "<mask>"
MASK_ID = len(RESERVED_TOKENS)  # 4, in a vocabulary learned with extra_reserved=(MASK_TOKEN,)
LM_RESERVED_TOKENS = RESERVED_TOKENS + (MASK_TOKEN,)
