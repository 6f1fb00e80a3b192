"""The exported signatures as a deployer meets them.

Awkward input, concurrent callers, and the REST/gRPC clients against a loopback stand-in of the
model server.
"""

import threading
from concurrent import futures

import numpy as np
import pytest
import tensorflow as tf

from benchmarks.harness.stand_in_server import StandInServer
from keras_transformer.export import MAX_TEXT_BYTES
from keras_transformer.export.clients import GrpcClient, RestClient

pytestmark = pytest.mark.slow

SENTENCES = ["march 21, 1987", "21.03.1987", "Sat 21 Mar 1987", "the first of may two thousand and four"]


def translate(loaded_export, texts):
    """Call the text signature; return numpy outputs."""
    outputs = loaded_export.signatures["serving_default"](text=tf.constant(texts, dtype=tf.string))
    return {name: value.numpy() for name, value in outputs.items()}


@pytest.mark.parametrize("text", ["", " ", "  \t\n  "], ids=["empty", "space", "whitespace"])
def test_text_without_tokens_translates_to_the_empty_string(loaded_export, text):
    out = translate(loaded_export, [text, SENTENCES[0]])
    assert out["translation"][0] == b"" and out["score"][0] == 0.0 and not out["truncated"][0]
    # The rest of the batch is unaffected.
    assert out["translation"][1] == translate(loaded_export, [SENTENCES[0]])["translation"][0] != b""


def test_input_longer_than_max_source_len_is_truncated_and_flagged(loaded_run, loaded_export):
    _, model_config, _, translator = loaded_run
    long_text = " ".join([SENTENCES[0]] * 40)
    assert translator.source_tokenizer.tokenize([long_text]).row_lengths()[0] > model_config.max_source_len
    out = translate(loaded_export, [long_text, SENTENCES[0]])
    assert out["truncated"].tolist() == [True, False]
    assert out["translation"][0] != b"" and np.isfinite(out["score"]).all()
    # A huge input (1 MB) is cut the same way, not fed whole to the model.
    huge = translate(loaded_export, ["1" * 1_000_000 + " " + long_text])
    assert huge["truncated"].tolist() == [True]


def test_text_longer_than_max_text_bytes_is_read_up_to_the_limit(loaded_export):
    """Only the first MAX_TEXT_BYTES bytes of a text are translated; a longer one is flagged.

    The limit bounds the time of one text: tokenization used to run over the whole text, so ten
    megabytes of short words took seconds.
    """
    sentence = SENTENCES[0].encode()
    at_limit = sentence + b" " * (MAX_TEXT_BYTES - len(sentence))
    out = translate(loaded_export, [sentence, at_limit, at_limit + b"x", at_limit + b" 1987" * 2_000_000])
    assert out["truncated"].tolist() == [False, False, True, True]
    assert len(set(out["translation"].tolist())) == 1  # whatever follows the limit is not read


def test_invalid_utf8_is_replaced_not_an_error(loaded_export):
    out = translate(loaded_export, [b"\xff\xfe 21.03.\xc3 1987", b"\x80\x80\x80"])
    assert out["translation"].shape == (2,)
    for translation in out["translation"]:
        translation.decode("utf-8")  # the output is valid UTF-8


def test_characters_never_seen_in_training_still_get_a_translation(loaded_export):
    out = translate(loaded_export, ["日本語 🙂 Ωμέγα", "21.03.1987 ☃"])
    assert out["translation"].shape == (2,) and np.isfinite(out["score"]).all()
    assert not out["truncated"].any()


def test_empty_batch_gives_empty_outputs(loaded_export):
    out = translate(loaded_export, [])
    assert {name: value.shape for name, value in out.items()} == {"translation": (0,), "score": (0,), "truncated": (0,)}
    ids = loaded_export.signatures["translate_ids"](source_ids=tf.zeros((0, 5), tf.int32))
    assert ids["output_ids"].shape == (0, 14)


def test_translate_ids_is_the_text_signature_without_tokenization(loaded_run, loaded_export):
    _, _, _, translator = loaded_run
    source_ids = translator.source_tokenizer.tokenize(SENTENCES + [""]).to_tensor()
    ids = loaded_export.signatures["translate_ids"](source_ids=source_ids)
    text = translate(loaded_export, SENTENCES + [""])
    assert translator.target_tokenizer.detokenize(ids["output_ids"]).numpy().tolist() == text["translation"].tolist()
    np.testing.assert_allclose(ids["score"].numpy(), text["score"], atol=1e-5)
    assert ids["output_ids"].numpy()[-1].tolist() == [0] * 14  # all-padding row -> no output


@pytest.mark.parametrize("bad_id", [-1, 10**6], ids=["negative", "beyond-vocabulary"])
def test_out_of_range_ids_are_rejected_and_the_model_keeps_serving(loaded_export, bad_id):
    with pytest.raises(tf.errors.InvalidArgumentError, match="source_ids must be"):
        loaded_export.signatures["translate_ids"](source_ids=tf.constant([[5, bad_id, 6]], tf.int32))
    assert translate(loaded_export, [SENTENCES[1]])["translation"][0] != b""


def test_eight_threads_get_the_same_answers_as_sequential_calls(loaded_export):
    """200 requests of 1-3 sentences from 8 threads at once.

    All are answered, each equal to the same request made alone.
    """
    rng = np.random.default_rng(0)
    requests = [list(rng.choice(SENTENCES + ["", "21.03.1987 ☃"], size=rng.integers(1, 4))) for _ in range(200)]
    sequential = [translate(loaded_export, texts) for texts in requests]
    start = threading.Barrier(8)

    def call(texts):
        return translate(loaded_export, texts)

    def first_call_after_barrier(texts):
        start.wait(timeout=60)
        return call(texts)

    with futures.ThreadPoolExecutor(max_workers=8) as pool:
        jobs = [pool.submit(first_call_after_barrier, texts) for texts in requests[:8]]
        jobs += [pool.submit(call, texts) for texts in requests[8:]]
        concurrent = [job.result(timeout=300) for job in jobs]
    assert len(concurrent) == 200
    for alone, together in zip(sequential, concurrent):
        assert alone["translation"].tolist() == together["translation"].tolist()
        np.testing.assert_allclose(alone["score"], together["score"], atol=1e-5)


@pytest.fixture(scope="module")
def server(trained_run):
    _, summary = trained_run
    with StandInServer({"dates": str(summary["export_path"].rsplit("/", 1)[0])}) as stand_in:
        yield stand_in


@pytest.mark.parametrize("format", ["row", "columnar"])
def test_rest_client_translates_through_the_served_export(loaded_export, server, format):
    client = RestClient(server.rest_url, model_name="dates", timeout=60)
    out = client.predict({"text": SENTENCES}, format=format)
    expected = translate(loaded_export, SENTENCES)
    assert out["translation"].tolist() == expected["translation"].tolist()
    np.testing.assert_allclose(out["score"], expected["score"], atol=1e-5)
    assert out["truncated"].tolist() == [False] * len(SENTENCES)


def test_grpc_client_translates_and_calls_translate_ids(loaded_export, server):
    with GrpcClient(server.grpc_target, model_name="dates", version=1, timeout=60) as client:
        out = client.predict({"text": SENTENCES})
    assert out["translation"].tolist() == translate(loaded_export, SENTENCES)["translation"].tolist()
    with GrpcClient(server.grpc_target, model_name="dates", signature_name="translate_ids", timeout=60) as client:
        ids = client.predict({"source_ids": np.array([[5, 6, 7, 0]], np.int32)})
    assert ids["output_ids"].dtype == np.int32 and ids["output_ids"].shape == (1, 14)
