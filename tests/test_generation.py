"""Generation from a decoder-only model: the cache against the model, samplers against keras-hub's.

Random tiny models (D=8, H=2, F=16, V=11, two blocks), ended by a token they generate in some
rows only, so that some rows end early and others run to the limit. The references re-run the
whole model on the growing sequence (the uncached loop) or hand keras-hub's samplers a `next`
function that does.
"""

import keras
import keras_hub
import numpy as np
import pytest
from conftest import to_numpy, trained_like_betas

from keras_transformer.config import LanguageModelConfig
from keras_transformer.data.special_tokens import END_ID, LM_RESERVED_TOKENS, MASK_ID, PAD_ID, START_ID, UNK_ID
from keras_transformer.decoding.generation import CachedDecoderOnly, generate, get_sampler, pad_after_end
from keras_transformer.models import build_decoder_only, build_encoder_only

# At the first step a position self-attends over one key; Keras warns about a softmax over size 1.
pytestmark = pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")

B, T, D, H, F, V, N = 2, 5, 8, 2, 16, 11, 2
MAX_LENGTH = 8
NEVER_EMITTED = [PAD_ID, UNK_ID, START_ID]
# Right-padded prompts of different lengths, one of them empty (it starts from <s>).
PROMPTS = np.array([[START_ID, 5, 6, 0], [START_ID, 7, 0, 0], [START_ID, 4, 9, 10], [0, 0, 0, 0]], "int32")


def lm_config(**overrides):
    values = dict(vocab_size=V, d_model=D, num_heads=H, d_ff=F, num_blocks=N, dropout_rate=0.0, max_length=12)
    return LanguageModelConfig(**{**values, **overrides, "kind": "decoder"}).validate()


def decoder_model(seed=0, **overrides):
    keras.utils.set_random_seed(seed)
    return build_decoder_only(lm_config(**overrides))


@pytest.fixture(scope="module")
def model():
    return decoder_model(seed=3)


def allowed_logits(logits):
    """NumPy logits `[..., V]` with the tokens generation never emits made impossible."""
    logits = np.array(logits, "float32")
    logits[..., NEVER_EMITTED] = -np.inf
    return logits


def reference_greedy(model, prompts, max_length):
    """The uncached loop, without an end token: the model re-run on the whole sequences at every step.

    Each row takes the argmax at its last position (the model is causal and the rows right-padded,
    so the rows can share the calls).
    """
    sequences = np.zeros((len(prompts), max_length), "int32")
    lengths = np.maximum((prompts != PAD_ID).sum(axis=1), 1)
    sequences[:, : prompts.shape[1]] = prompts
    sequences[(prompts == PAD_ID).all(axis=1), 0] = START_ID  # an empty prompt starts from <s>
    for length in range(lengths.min(), max_length):
        logits = allowed_logits(to_numpy(model(sequences[:, :length])))  # (B, length, V)
        growing = lengths <= length
        sequences[growing, length] = logits[growing, length - 1].argmax(axis=-1)
    return sequences


def ended_at(sequences, prompts, end_id):
    """`sequences` with padding after the first `end_id` of each row's continuation."""
    sequences = sequences.copy()
    for row, prompt_length in zip(sequences, np.maximum((prompts != PAD_ID).sum(axis=1), 1)):
        ends = np.flatnonzero(row[prompt_length:] == end_id)
        if ends.size:
            row[prompt_length + ends[0] + 1 :] = PAD_ID
    return sequences


def an_end_id(sequences):
    """A token that ends some rows of the greedy continuations of `PROMPTS` early, and not others.

    A random model rarely chooses `</s>` itself; with this token as `end_id`, generation both stops
    early and runs to the limit.
    """
    continuations = [set(row[max((prompt != 0).sum(), 1) :].tolist()) for row, prompt in zip(sequences, PROMPTS)]
    for token in range(V):
        if 0 < sum(token in row for row in continuations) < len(continuations):
            return token
    raise AssertionError(f"every row continues with the same tokens: {sequences}")


@pytest.fixture(scope="module")
def end_id(model):
    return an_end_id(reference_greedy(model, PROMPTS, MAX_LENGTH))


def uncached_next(model):
    """keras-hub's `next(prompt, cache, index)` by re-running the whole model: logits of position `index`."""

    def next_logits(prompt, cache, index):
        logits = model(prompt)  # (B, L, V), causal: positions after `index - 1` change nothing there
        logits = keras.ops.take(logits, keras.ops.reshape(index - 1, (1,)), axis=1)[:, 0, :]  # (B, V)
        never = keras.ops.isin(keras.ops.arange(V), NEVER_EMITTED)[None, :]
        return keras.ops.where(never, -1e9, logits), None, cache

    return next_logits


def test_cached_logits_equal_the_model_and_are_causal(model):
    decoder = CachedDecoderOnly(model)
    rng = np.random.default_rng(0)
    ids = np.concatenate([np.full((B, 1), START_ID), rng.integers(4, V, size=(B, T - 1))], axis=1).astype("int32")

    def stepped_logits(ids, prefill):
        """Logits of positions `prefill - 1 .. T - 2`, predicted step by step after a prefill."""
        _, cache = decoder.prefill(ids[:, :prefill], T)
        logits = []
        for index in range(prefill, T):
            step_logits, _, cache = decoder.next_token_logits(ids, cache, index)  # (B, V)
            logits.append(to_numpy(step_logits))
        return np.stack(logits, axis=1)

    expected = allowed_logits(to_numpy(model(ids)))[:, :-1]  # (B, T - 1, V): position t predicts t + 1
    real = slice(START_ID + 1, None)  # the ids generation may emit (the others are -inf or -1e9)
    np.testing.assert_allclose(stepped_logits(ids, 3)[..., real], expected[:, 2:, real], atol=1e-5)
    # Rows 2 .. 5 have token 1 or 3 changed: through the cache, no logit before that position changes.
    changed = [ids.copy(), ids.copy()]
    for variant, t in zip(changed, (1, 3)):
        variant[:, t] = np.where(ids[:, t] == 4, 5, 4)
    logits = stepped_logits(np.concatenate([ids] + changed), 1).reshape(3, B, T - 1, V)
    np.testing.assert_allclose(logits[0][..., real], expected[..., real], atol=1e-5)
    for variant_logits, t in zip(logits[1:], (1, 3)):
        np.testing.assert_allclose(variant_logits[:, :t], logits[0][:, :t], atol=1e-6)
        assert np.abs(variant_logits[:, t, real] - logits[0][:, t, real]).max() > 1e-4


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"tie_embeddings": False, "learned_positions": True, "attention_score": "additive"},
        # Masks from each sublayer's inputs, kept per position in the cache.
        {"variant": "document"},
        {"variant": "repository"},
    ],
    ids=["tied", "untied-learned-positions-additive", "document", "repository"],
)
def test_cached_greedy_generation_equals_the_uncached_loop(overrides):
    model = decoder_model(seed=3, **overrides)
    if overrides.get("variant") == "repository":
        trained_like_betas(model)  # its zero-sum masks would otherwise be rounding's choice
    reference = reference_greedy(model, PROMPTS, MAX_LENGTH)
    end_id = an_end_id(reference)
    generated = to_numpy(generate(model, PROMPTS, MAX_LENGTH, end_id=end_id))
    np.testing.assert_array_equal(generated, ended_at(reference, PROMPTS, end_id))
    assert generated.dtype == np.int32
    # Some rows end early (then padding), others run to the limit; the prompts come back unchanged.
    ended = (generated[:, -1] == PAD_ID) | (generated[:, -1] == end_id)
    assert ended.any() and not ended.all(), generated
    assert (generated[:, :4][PROMPTS != 0] == PROMPTS[PROMPTS != 0]).all() and generated[3, 0] == START_ID
    assert not np.isin(generated[:, 1:], [START_ID]).any()


# Greedy is the uncached loop's argmax (above); top-k's seeds are tested below.
SAMPLER_FACTORIES = {
    "beam": lambda seed: keras_hub.samplers.BeamSampler(num_beams=2),
    "top_p": lambda seed: keras_hub.samplers.TopPSampler(p=0.8, temperature=0.7, seed=seed),
    "random": lambda seed: keras_hub.samplers.RandomSampler(temperature=2.0, seed=seed),
}


@pytest.mark.parametrize("name", list(SAMPLER_FACTORIES))
def test_samplers_through_the_cache_equal_keras_hub_samplers_on_the_whole_model(model, end_id, name):
    ours = to_numpy(generate(model, PROMPTS, MAX_LENGTH, SAMPLER_FACTORIES[name](None), seed=7, end_id=end_id))
    prompt = np.pad(PROMPTS, ((0, 0), (0, MAX_LENGTH - PROMPTS.shape[1])))
    prompt[3, 0] = START_ID
    mask = prompt != PAD_ID
    theirs = SAMPLER_FACTORIES[name](7)(
        next=uncached_next(model),
        prompt=prompt,
        index=int(mask.sum(axis=1).min()),
        mask=mask,
        stop_token_ids=(end_id,),
        model=model,
    )
    np.testing.assert_array_equal(ours, to_numpy(pad_after_end(theirs, mask, end_id)))


def test_equal_seeds_repeat_a_sample_and_different_seeds_do_not(model):
    def top_k(seed):
        return to_numpy(generate(model, PROMPTS[:2], 5, "top_k", seed=seed, end_id=None))

    first = top_k(1)
    np.testing.assert_array_equal(top_k(1), first)
    assert not np.array_equal(top_k(2), first)


def test_generate_without_end_id_runs_to_max_length_and_full_prompts_come_back(model):
    generated = to_numpy(generate(model, PROMPTS, MAX_LENGTH, end_id=None))
    assert (generated != PAD_ID).all()
    full = generated[:, :6]
    np.testing.assert_array_equal(to_numpy(generate(model, full, 6)), full)
    assert to_numpy(generate(model, np.zeros((0, 3), "int32"), 5)).shape == (0, 5)


def test_pad_after_end_ignores_end_tokens_of_the_prompt():
    tokens = np.array([[2, 3, 5, 3, 6, 3], [2, 5, 6, 7, 3, 8]], "int32")
    prompt_mask = np.array([[1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]], bool)
    expected = np.array([[2, 3, 5, 3, 0, 0], [2, 5, 6, 7, 3, 0]], "int32")
    np.testing.assert_array_equal(to_numpy(pad_after_end(tokens, prompt_mask)), expected)
    np.testing.assert_array_equal(to_numpy(pad_after_end(tokens, prompt_mask, end_id=None)), tokens)


def test_bad_arguments_raise_value_errors_naming_them(model):
    with pytest.raises(ValueError, match="`max_length` must be an int >= 1. Received: max_length=0"):
        generate(model, PROMPTS, 0)
    with pytest.raises(
        ValueError, match="The prompts are longer than `max_length`. Received: prompt length=4, max_length=3"
    ):
        generate(model, PROMPTS, 3)
    with pytest.raises(ValueError, match="`sampler` must be one of .*Received: sampler='nucleus'"):
        generate(model, PROMPTS, MAX_LENGTH, "nucleus")
    with pytest.raises(ValueError, match="`sampler` must be a name or a keras-hub sampler. Received: sampler=42"):
        generate(model, PROMPTS, MAX_LENGTH, 42)
    with pytest.raises(ValueError, match="Options are for a sampler given by name. Received: \\['k'\\]"):
        get_sampler(keras_hub.samplers.TopKSampler(), k=3)
    with pytest.raises(ValueError, match="return_all_beams=False"):
        generate(model, PROMPTS, MAX_LENGTH, keras_hub.samplers.BeamSampler(return_all_beams=True))
    learned = decoder_model(learned_positions=True, max_length=6, num_blocks=1)
    with pytest.raises(ValueError, match="max_length=7, model max_length=6"):
        generate(learned, PROMPTS, 7)
    encoder = build_encoder_only(
        LanguageModelConfig(kind="encoder", vocab_size=V, d_model=D, num_heads=H, d_ff=F, num_blocks=1)
    )
    with pytest.raises(
        ValueError, match="Generation needs a decoder-only \\(causal\\) model. Received: model 'encoder_only'"
    ):
        generate(encoder, PROMPTS, MAX_LENGTH)
    with pytest.raises(ValueError, match="Not a model of `build_decoder_only`: it has no layer 'token_embedding'"):
        CachedDecoderOnly(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]))


# The reserved ids of a vocabulary with <mask>, but </s>; where each row of PROMPTS continues.
RESERVED_BUT_END = [PAD_ID, UNK_ID, START_ID, MASK_ID]
PROMPT_STARTS = np.maximum((PROMPTS != PAD_ID).sum(axis=1), 1)  # an empty prompt starts with <s>


def reserved_loving_model():
    """A decoder whose logits favour the reserved ids (+8 on their biases) and avoid `</s>` (-8)."""
    model = decoder_model(seed=3, tie_embeddings=False)
    bias = model.get_layer("logits").bias
    vocab_ids = keras.ops.arange(V)
    favoured = keras.ops.isin(vocab_ids, RESERVED_BUT_END)
    bias.assign(keras.ops.where(favoured, 8.0, keras.ops.where(vocab_ids == END_ID, -8.0, bias)))
    return model


def continuation_ids(generated):
    """The ids generated after each row of PROMPTS, all rows' in one flat array."""
    return np.concatenate([row[start:] for row, start in zip(generated, PROMPT_STARTS)])


@pytest.mark.parametrize("sampler", ["greedy", "beam", "top_k", "top_p", "random"])
def test_no_sampler_writes_a_reserved_token_even_where_the_model_likes_them_best(sampler):
    """With a vocabulary that holds `<mask>` (5 reserved ids), no reserved token is ever written.

    The model's logits are pushed towards `<pad>`, `<unk>`, `<s>` and `<mask>` (+8 on their biases)
    and away from `</s>` (-8, so that every row runs to the limit), and the samplers draw at
    temperature 2: unmasked, they would write the reserved tokens everywhere.
    """
    model = reserved_loving_model()
    options = {} if sampler in ("greedy", "beam") else {"temperature": 2.0}

    def continuations(**reserved):
        generated = generate(model, PROMPTS, MAX_LENGTH, get_sampler(sampler, seed=1, **options), **reserved)
        return continuation_ids(to_numpy(generated))

    written = continuations(num_reserved=len(LM_RESERVED_TOKENS))
    assert written.size == (MAX_LENGTH - PROMPT_STARTS).sum() and not np.isin(written, RESERVED_BUT_END).any()
    # The same model, told the vocabulary has no <mask> (id 4 is a text piece there), writes id 4.
    assert (continuations() == MASK_ID).any()


def test_the_lm_exports_never_write_the_reserved_tokens_of_their_vocabulary(tmp_path):
    """`TextGenerator` takes its tokenizer's reserved ids (with `<mask>`: 5); its ids-only export keeps them."""
    import tensorflow as tf

    from keras_transformer.data.tokenizers import SubwordTokenizer
    from keras_transformer.export import IdsGenerator, TextGenerator

    model = reserved_loving_model()
    vocab_path = tmp_path / "vocab.txt"
    vocab_path.write_text("\n".join([*LM_RESERVED_TOKENS, *(f"w{i}" for i in range(V - 5))]) + "\n")
    tokenizer = SubwordTokenizer(str(vocab_path))
    assert tokenizer.num_reserved == len(LM_RESERVED_TOKENS) and tokenizer.vocab_size == V
    config_path = tmp_path / "model_config.json"
    lm_config(tie_embeddings=False).save(config_path)
    generator = TextGenerator(model, lm_config(tie_embeddings=False), tokenizer, config_path)
    for module in (generator, generator.ids_only()):
        assert isinstance(module, IdsGenerator) and module.num_reserved == len(LM_RESERVED_TOKENS)
        generated = module.generate_ids(tf.constant(PROMPTS))["output_ids"].numpy()
        written = continuation_ids(generated)
        assert written.size and not np.isin(written, RESERVED_BUT_END).any(), generated
