"""`keras_transformer.export.clients` clients against a stand-in TF Serving, on small SavedModels made here.

The stand-in is `benchmarks/harness/stand_in_server.py`: the real model server cannot be installed here.
"""

import json
import socket
import threading
import time
import urllib.request
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from benchmarks.harness.stand_in_server import StandInServer
from keras_transformer.export.clients import (
    UNNAMED_OUTPUT_KEY,
    GrpcClient,
    RestClient,
    ServingError,
    predict_request,
    rest_request_body,
)

TEXT = ["hello", "good morning"]
NUMBERS, FACTOR = [[1, 2, 3], [4, 5, 6]], [10, -1]
# Not valid UTF-8, then valid UTF-8 given as bytes and as str.
RAW = [b"\xff\xfe caf\xc3\xa9", b"caf\xc3\xa9", "na\u00efve"]
RAW_AS_BYTES = [b"\xff\xfe caf\xc3\xa9", b"caf\xc3\xa9", "na\u00efve".encode()]


class Toy(tf.Module):
    """Signatures: text -> two named outputs, two int inputs -> one output, and echoes of bytes."""

    def __init__(self, tag):
        super().__init__()
        self.tag = tag  # tells the versions apart

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def translate(self, text):
        """`text: string[B]` -> `{"translation": string[B], "length": int32[B]}`."""
        translation = tf.strings.join([tf.strings.upper(text), self.tag], separator=" ")
        return {"translation": translation, "length": tf.strings.length(text)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def translate_like_export(self, text):
        """The outputs of our exports' `serving_default`.

        `text: string[B]` -> `{"translation": string[B], "score": float32[B], "truncated": bool[B]}`.
        """
        length = tf.strings.length(text)
        return {
            "translation": tf.strings.join([tf.strings.upper(text), self.tag], separator=" "),
            "score": -tf.cast(length, tf.float32) / 4,
            "truncated": length > 5,
        }

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, None], tf.int32, name="numbers"),
            tf.TensorSpec([None], tf.int32, "factor"),
        ]
    )
    def scale(self, numbers, factor):
        """`numbers: int32[B, N], factor: int32[B]` -> `{"scaled": int32[B, N]}`."""
        return {"scaled": numbers * factor[:, tf.newaxis]}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="data")])
    def echo(self, data):
        """`data: string[B]` -> the same bytes as `data` and as `data_bytes` (which TF Serving sends as b64)."""
        return {"data": tf.identity(data), "data_bytes": tf.identity(data)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="data")])
    def echo_bytes(self, data):
        """`data: string[B]` -> `{"data_bytes": string[B]}`: one unnamed output of `{"b64": ...}` values over REST."""
        return {"data_bytes": tf.identity(data)}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """`.../toy/1` and `.../toy/2`, which differ in the tag their translations end with."""
    base = tmp_path_factory.mktemp("serving") / "toy"
    for version in (1, 2):
        toy = Toy(f"v{version}")
        signatures = {
            "serving_default": toy.translate,
            "scale": toy.scale,
            "echo": toy.echo,
            "echo_bytes": toy.echo_bytes,
            "like_export": toy.translate_like_export,
        }
        tf.saved_model.save(toy, str(base / str(version)), signatures=signatures)
    return base


@pytest.fixture(scope="module")
def server(model_dir):
    with StandInServer({"toy": model_dir}) as server:
        yield server


@pytest.fixture(scope="module")
def latest(model_dir):
    """Version 2, loaded here independently of the server, for direct calls."""
    return tf.saved_model.load(str(model_dir / "2")).signatures


@pytest.fixture
def closed_port():
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def silent_port():
    """A loopback port whose connections are accepted (by the kernel's backlog) and never answered."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


class StuckServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """A gRPC model server that does not answer until released."""

    def __init__(self):
        self.release = threading.Event()

    def Predict(self, request, context):
        self.release.wait(10)
        return predict_pb2.PredictResponse()


@pytest.fixture
def stuck_grpc_target():
    servicer = StuckServicer()
    stuck = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(servicer, stuck)
    port = stuck.add_insecure_port("127.0.0.1:0")
    stuck.start()
    yield f"127.0.0.1:{port}"
    servicer.release.set()
    stuck.stop(grace=None).wait()


@pytest.fixture(scope="module")
def html_url():
    """A web server that is not TF Serving: HTML answers, 200 on `/v1/models/ok...`, 502 elsewhere."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            payload = b"<html>Bad Gateway</html>"
            self.send_response(200 if self.path.startswith("/v1/models/ok") else 502)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Handler) as web:
        thread = threading.Thread(target=web.serve_forever, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{web.server_address[1]}"
        web.shutdown()
        thread.join()


# --- Requests -------------------------------------------------------------------------------------


def test_rest_request_body_formats():
    inputs = {"numbers": np.array([[1, 2], [3, 4]], np.int32), "text": ["a", b"\xff"]}
    assert rest_request_body(inputs, "scale") == {
        "signature_name": "scale",
        "instances": [{"numbers": [1, 2], "text": "a"}, {"numbers": [3, 4], "text": {"b64": "/w=="}}],
    }
    assert rest_request_body(inputs, format="columnar") == {
        "signature_name": "serving_default",
        "inputs": {"numbers": [[1, 2], [3, 4]], "text": ["a", {"b64": "/w=="}]},
    }
    assert rest_request_body({"x": np.float32(0.5)}, format="columnar")["inputs"] == {"x": 0.5}
    json.dumps(rest_request_body(inputs))  # JSON-serializable as it is


@pytest.mark.parametrize(
    "inputs, format, message",
    [
        ({"text": ["a"]}, "rows", "`format` must be one of .* Received: format='rows'"),
        ({}, "row", "inputs is empty"),
        ({"x": 3}, "row", "input 'x' is a scalar"),
        ({"a": [1, 2], "b": [1]}, "row", r"same batch size. Received sizes: \{'a': 2, 'b': 1\}"),
    ],
)
def test_rest_request_body_rejects_bad_arguments(inputs, format, message):
    with pytest.raises(ValueError, match=message):
        rest_request_body(inputs, format=format)


def test_predict_request_tensors_round_trip():
    inputs = {"text": ["h\u00e9llo", b"\xff"], "numbers": np.array([[1, 2]], np.int32), "flags": [True, False]}
    request = predict_request("toy", inputs, "scale", version=3)
    assert isinstance(request, predict_pb2.PredictRequest)
    assert (request.model_spec.name, request.model_spec.signature_name) == ("toy", "scale")
    assert request.model_spec.version.value == 3
    assert request.inputs["text"].dtype == tf.string.as_datatype_enum
    assert tf.make_ndarray(request.inputs["text"]).tolist() == ["h\u00e9llo".encode(), b"\xff"]
    numbers = tf.make_ndarray(request.inputs["numbers"])
    assert numbers.dtype == np.int32 and numbers.tolist() == [[1, 2]]
    assert tf.make_ndarray(request.inputs["flags"]).tolist() == [True, False]
    assert predict_pb2.PredictRequest.FromString(request.SerializeToString()) == request  # as in a warm-up file
    default = predict_request("toy", {"text": ["a"]})
    assert default.model_spec.signature_name == "serving_default"
    assert not default.model_spec.HasField("version")


# --- Predictions ----------------------------------------------------------------------------------


@pytest.mark.parametrize("format", ["row", "columnar"])
def test_rest_predict_equals_a_direct_call(server, latest, format):
    expected = latest["serving_default"](text=tf.constant(TEXT))
    outputs = RestClient(server.rest_url, model_name="toy").predict({"text": TEXT}, format=format)
    assert sorted(outputs) == ["length", "translation"]
    assert outputs["translation"].dtype == object
    assert outputs["translation"].tolist() == expected["translation"].numpy().tolist()
    assert outputs["translation"].tolist() == [b"HELLO v2", b"GOOD MORNING v2"]
    np.testing.assert_array_equal(outputs["length"], expected["length"].numpy())
    np.testing.assert_array_equal(outputs["length"], [5, 12])


@pytest.mark.parametrize("format", ["row", "columnar"])
def test_rest_answer_of_an_export_like_signature_is_keyed_by_output_names(server, format):
    """Our exports' signatures have three outputs, so REST answers name them (no "predictions" key)."""
    outputs = RestClient(server.rest_url, model_name="toy", signature_name="like_export").predict(
        {"text": TEXT}, format=format
    )
    assert sorted(outputs) == ["score", "translation", "truncated"]
    assert outputs["translation"].tolist() == [b"HELLO v2", b"GOOD MORNING v2"]
    np.testing.assert_allclose(outputs["score"], [-1.25, -3.0])
    assert outputs["truncated"].dtype == bool and outputs["truncated"].tolist() == [False, True]
    with GrpcClient(server.grpc_target, model_name="toy", signature_name="like_export") as client:
        assert sorted(client.predict({"text": TEXT})) == sorted(outputs)


@pytest.mark.parametrize("format", ["row", "columnar"])
def test_rest_non_default_signature_with_a_single_output(server, latest, format):
    client = RestClient(server.rest_url, model_name="toy", signature_name="scale")
    outputs = client.predict({"numbers": np.array(NUMBERS), "factor": FACTOR}, format=format)
    expected = latest["scale"](numbers=tf.constant(NUMBERS), factor=tf.constant(FACTOR))["scaled"].numpy()
    assert list(outputs) == [UNNAMED_OUTPUT_KEY]  # TF Serving does not name a single output
    np.testing.assert_array_equal(outputs[UNNAMED_OUTPUT_KEY], expected)
    assert expected.tolist() == [[10, 20, 30], [-4, -5, -6]]


def test_grpc_predict_equals_rest(server):
    rest = RestClient(server.rest_url, model_name="toy")
    with GrpcClient(server.grpc_target, model_name="toy") as client:
        outputs = client.predict({"text": TEXT})
    expected = rest.predict({"text": TEXT})
    assert sorted(outputs) == sorted(expected) == ["length", "translation"]
    assert outputs["translation"].tolist() == expected["translation"].tolist()
    assert outputs["length"].dtype == np.int32  # gRPC keeps the signature's dtypes
    np.testing.assert_array_equal(outputs["length"], expected["length"])

    rest.signature_name = "scale"
    with GrpcClient(server.grpc_target, model_name="toy", signature_name="scale") as client:
        scaled = client.predict({"numbers": NUMBERS, "factor": FACTOR})  # Python ints go as int32
    assert list(scaled) == ["scaled"]  # gRPC keeps the name of a single output
    np.testing.assert_array_equal(scaled["scaled"], rest.predict({"numbers": NUMBERS, "factor": FACTOR})["predictions"])


@pytest.mark.parametrize("version, tag", [(1, b"v1"), (2, b"v2"), (None, b"v2")])
def test_version_routing(server, version, tag):
    rest = RestClient(server.rest_url, model_name="toy", version=version)
    assert rest.predict({"text": ["a"]})["translation"].tolist() == [b"A " + tag]
    with GrpcClient(server.grpc_target, model_name="toy", version=version) as client:
        assert client.predict({"text": ["a"]})["translation"].tolist() == [b"A " + tag]


def test_model_status(server):
    statuses = RestClient(server.rest_url, model_name="toy").model_status()["model_version_status"]
    assert [status["version"] for status in statuses] == ["2", "1"]
    assert {status["state"] for status in statuses} == {"AVAILABLE"}
    assert statuses[0]["status"] == {"error_code": "OK", "error_message": ""}
    one = RestClient(server.rest_url, model_name="toy", version=1).model_status()["model_version_status"]
    assert [status["version"] for status in one] == ["1"]
    with pytest.raises(ServingError, match="answered 404: Could not find version 7 of model toy"):
        RestClient(server.rest_url, model_name="toy", version=7).model_status()


@pytest.mark.parametrize("format", ["row", "columnar"])
def test_non_utf8_bytes_round_trip(server, format):
    column = rest_request_body({"data": RAW}, format="columnar")["inputs"]["data"]
    assert column == [{"b64": "//4gY2Fmw6k="}, "caf\u00e9", "na\u00efve"]  # only invalid UTF-8 goes as base64
    outputs = RestClient(server.rest_url, model_name="toy", signature_name="echo").predict({"data": RAW}, format=format)
    assert outputs["data"].tolist() == RAW_AS_BYTES  # written raw into the JSON
    assert outputs["data_bytes"].tolist() == RAW_AS_BYTES  # written as {"b64": ...}
    single = RestClient(server.rest_url, model_name="toy", signature_name="echo_bytes").predict({"data": RAW}, format)
    assert list(single) == [UNNAMED_OUTPUT_KEY]  # a list of {"b64": ...} values is not a list of named outputs
    assert single[UNNAMED_OUTPUT_KEY].tolist() == RAW_AS_BYTES
    with GrpcClient(server.grpc_target, model_name="toy", signature_name="echo") as client:
        assert client.predict({"data": RAW})["data"].tolist() == RAW_AS_BYTES


def test_stand_in_writes_text_outputs_like_tf_serving(server):
    """The answer the test above decodes: raw bytes for `data`, base64 for `data_bytes`."""
    body = json.dumps({"signature_name": "echo", "inputs": {"data": [{"b64": "//4="}]}}).encode()
    request = urllib.request.Request(f"{server.rest_url}/v1/models/toy:predict", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        raw = response.read()
    assert b'"data": ["\xff\xfe"]' in raw
    assert b'"data_bytes": [{"b64": "//4="}]' in raw


# --- Errors ---------------------------------------------------------------------------------------


def test_unknown_model_or_version_is_a_serving_error_with_the_servers_message(server):
    with pytest.raises(ServingError, match=r"answered 404: Servable not found for request: Latest\(nope\)") as info:
        RestClient(server.rest_url, model_name="nope").predict({"text": TEXT})
    assert info.value.code == 404
    assert f"model 'nope', latest version, signature 'serving_default' at {server.rest_url}" in str(info.value)
    with pytest.raises(ServingError, match=r"answered 404: Servable not found for request: Specific\(toy, 9\)"):
        RestClient(server.rest_url, model_name="toy", version=9).predict({"text": TEXT})
    with GrpcClient(server.grpc_target, model_name="nope") as client:
        with pytest.raises(ServingError, match=r"answered NOT_FOUND: Servable not found .*Latest\(nope\)") as info:
            client.predict({"text": TEXT})
    assert info.value.code == "NOT_FOUND"
    assert server.grpc_target in str(info.value)


@pytest.mark.parametrize(
    "format, message",
    [
        ("row", "key: txt of 'instances' list.* does not have named input: txt"),
        ("columnar", "Missing named input: text"),
    ],
)
def test_unknown_input_name_rest(server, format, message):
    with pytest.raises(ServingError, match=f"answered 400: .*{message}") as info:
        RestClient(server.rest_url, model_name="toy").predict({"txt": TEXT}, format=format)
    assert info.value.code == 400


def test_unknown_input_name_and_wrong_dtype_grpc(server):
    with GrpcClient(server.grpc_target, model_name="toy") as client:
        with pytest.raises(ServingError, match=r"INVALID_ARGUMENT: input tensor alias not found in signature: txt"):
            client.predict({"txt": TEXT})
    with GrpcClient(server.grpc_target, model_name="toy", signature_name="scale") as client:
        with pytest.raises(ServingError, match=r"INVALID_ARGUMENT: Expects arg\[numbers\] to be int32 but int64"):
            client.predict({"numbers": np.array(NUMBERS, np.int64), "factor": np.array(FACTOR, np.int32)})


def test_rest_wrong_json_type(server):
    with pytest.raises(ServingError, match='answered 400: JSON Value: "3" is not of expected type: int32'):
        RestClient(server.rest_url, model_name="toy", signature_name="scale").predict(
            {"numbers": [["3"]], "factor": [1]}, format="columnar"
        )


def test_unknown_signature(server):
    with pytest.raises(ServingError, match='answered 400: Serving signature name: "nope" not found'):
        RestClient(server.rest_url, model_name="toy", signature_name="nope").predict({"text": TEXT})
    with GrpcClient(server.grpc_target, model_name="toy", signature_name="nope") as client:
        with pytest.raises(ServingError, match='answered FAILED_PRECONDITION: Serving signature key "nope" not found'):
            client.predict({"text": TEXT})


def test_nothing_listening(closed_port):
    rest = RestClient(f"http://127.0.0.1:{closed_port}", model_name="toy", timeout=5)
    with pytest.raises(ServingError, match=f"connection refused at http://127.0.0.1:{closed_port} ") as info:
        rest.predict({"text": TEXT})
    assert info.value.code is None
    with pytest.raises(ServingError, match="connection refused"):
        rest.model_status()
    with GrpcClient(f"127.0.0.1:{closed_port}", model_name="toy", timeout=5) as client:
        with pytest.raises(ServingError, match=f"cannot reach the model server .* at 127.0.0.1:{closed_port}") as info:
            client.predict({"text": TEXT})
    assert info.value.code == "UNAVAILABLE"


def test_rest_timeout(silent_port):
    rest = RestClient(f"http://127.0.0.1:{silent_port}", model_name="toy", timeout=0.5)
    start = time.monotonic()
    with pytest.raises(ServingError, match="timed out after 0.5 s waiting for model 'toy'"):
        rest.predict({"text": TEXT})
    assert time.monotonic() - start < 5


def test_grpc_timeout(stuck_grpc_target):
    start = time.monotonic()
    with GrpcClient(stuck_grpc_target, model_name="toy", timeout=0.5) as client:
        with pytest.raises(ServingError, match="timed out after 0.5 s waiting for model 'toy'") as info:
            client.predict({"text": TEXT})
    assert info.value.code == "DEADLINE_EXCEEDED"
    assert time.monotonic() - start < 5


def test_rest_non_json_answers(html_url):
    with pytest.raises(ServingError, match="answered with non-JSON .*'<html>Bad Gateway</html>'"):
        RestClient(html_url, model_name="ok").predict({"text": TEXT})
    with pytest.raises(ServingError, match="answered 502: <html>Bad Gateway</html>") as info:
        RestClient(html_url, model_name="other").predict({"text": TEXT})
    assert info.value.code == 502
