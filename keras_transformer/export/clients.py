r"""Clients for a TF Serving model server: REST (standard library only) and gRPC (`tensorflow-serving-api`).

Start a server on an export (see `savedmodel.py` beside this module for the layout), for example with Docker:

    docker run -p 8500:8500 -p 8501:8501 -e MODEL_NAME=transformer \
        -v "$PWD/saved_models/transformer:/models/transformer" tensorflow/serving

then, for a model named "transformer" exported by `keras-transformer train` or `export`, whose
`serving_default` signature takes `text: string[B]` and returns `translation: string[B]`,
`score: float32[B]` and `truncated: bool[B]`:

    from keras_transformer.export.clients import GrpcClient, RestClient

    rest = RestClient("http://localhost:8501", model_name="transformer", timeout=5.0)
    outputs = rest.predict({"text": ["how are you?", "good morning"]})  # POST /v1/models/transformer:predict
    outputs["translation"]  # array([b'...', b'...'], dtype=object): one translation per input
    outputs["score"], outputs["truncated"]  # float64 and bool arrays of B (JSON carries no dtypes)
    rest.model_status()  # {"model_version_status": [{"version": "1", "state": "AVAILABLE", ...}]}

    with GrpcClient("localhost:8500", model_name="transformer", version=1) as client:
        outputs = client.predict({"text": ["how are you?"]})  # PredictionService.Predict
    outputs["translation"][0].decode("utf-8")

Outputs are keyed by their names, over REST as over gRPC: TF Serving's REST answer carries the
names whenever a signature has more than one output, and every signature of our exports has three.
Only for a signature with exactly one output does the REST answer leave the name out; `RestClient`
then returns that output under `UNNAMED_OUTPUT_KEY` ("predictions"). gRPC always keeps the names.

Both clients return `dict[str, np.ndarray]`. String outputs are numpy arrays of Python `bytes`
(dtype object), as TensorFlow's `.numpy()` gives them: decode with `.decode("utf-8")`. Every
failure (server unreachable, timeout, an error answer, a malformed answer) raises `ServingError`
naming the model, version, signature and address.

`predict_request` builds the gRPC `PredictRequest`; it is also the request format of the warm-up
file `assets.extra/tf_serving_warmup_requests`. `rest_request_body` builds the REST JSON body.
"""

import base64
import http.client
import json
import urllib.error
import urllib.parse
import urllib.request

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from keras_transformer.checks import check_choice

DEFAULT_SIGNATURE = "serving_default"
REST_FORMATS = ("row", "columnar")

# TF Serving's REST answer carries no output name when the signature has exactly one output
# (row format: `{"predictions": [v0, v1, ...]}`, columnar: `{"outputs": value}`); `RestClient`
# returns such an output under this key, in both formats.
UNNAMED_OUTPUT_KEY = "predictions"


class ServingError(Exception):
    """A prediction or status request failed; the message says what failed and where.

    Attributes:
        code: the HTTP status (int) or gRPC status name (str) the server answered with, or
            None when no answer came (connection refused, timeout, malformed answer).
    """

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


def _describe(model_name, version, signature_name=None):
    """E.g. "model 'transformer', version 2, signature 'serving_default'" for error messages."""
    parts = [f"model {model_name!r}", "latest version" if version is None else f"version {version}"]
    if signature_name is not None:
        parts.append(f"signature {signature_name!r}")
    return ", ".join(parts)


# --- Requests -------------------------------------------------------------------------------------


def _encode_text(value):
    """`value` with every `str` (also inside lists, tuples and numpy arrays) encoded as UTF-8 bytes."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (list, tuple)):
        return [_encode_text(item) for item in value]
    if isinstance(value, np.ndarray) and value.dtype.kind in "OU":
        return _encode_text(value.tolist())
    return value


def _first_leaf(value):
    """The first non-list element of a nested list (`value` itself when it is not a list)."""
    while isinstance(value, list) and value:
        value = value[0]
    return value


def predict_request(model_name, inputs, signature_name=DEFAULT_SIGNATURE, version=None):
    """The gRPC `PredictRequest` for `inputs`; no side effects.

    Args:
        model_name: the model's name on the server.
        inputs: `{input name: array-like}`. Text (`str`, `bytes`, or nested lists / numpy arrays of
            them) becomes DT_STRING, `str` encoded as UTF-8. Other values go through
            `tf.make_tensor_proto` unchanged, so their dtype must be the signature's: TF Serving
            does not convert over gRPC. Python lists of ints become int32 and of floats float32;
            numpy arrays keep their dtype (`np.array([1, 2])` is int64).
        signature_name: the signature to run.
        version: an integer version, or None for the latest one the server has.

    Returns:
        `tensorflow_serving.apis.predict_pb2.PredictRequest`.
    """
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    if version is not None:
        request.model_spec.version.value = int(version)
    for name, value in inputs.items():
        value = _encode_text(value)
        if isinstance(_first_leaf(value), bytes):
            value = np.array(value, dtype=object)
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    return request


def _to_json(value):
    """An array-like as JSON: nested lists; text as strings, or `{"b64": ...}` when not valid UTF-8."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return [_to_json(item) for item in value]
    array = np.asarray(value)
    if array.dtype.kind in "biuf":
        return array.tolist()
    if array.dtype.kind in "SU" or (array.dtype.kind == "O" and array.ndim > 0):
        return _to_json(array.tolist())
    raise TypeError(f"Cannot send a value of type {type(value).__name__} (dtype {array.dtype}) as JSON: {value!r}")


def rest_request_body(inputs, signature_name=DEFAULT_SIGNATURE, format="row"):
    """The JSON body (a dict) of `POST /v1/models/<name>[/versions/<v>]:predict`.

    Args:
        inputs: `{input name: array-like}`; numpy arrays become nested lists, `bytes` that are not
            valid UTF-8 become `{"b64": <base64>}` (TF Serving decodes those for string inputs).
        signature_name: the signature to run.
        format: "row" gives `{"signature_name": ..., "instances": [{name: value, ...}, ...]}`, one
            object per batch element (every input needs the same batch size B); "columnar" gives
            `{"signature_name": ..., "inputs": {name: value, ...}}`.

    Raises:
        ValueError: unknown `format`, no inputs, or (row format) a scalar input or unequal batch sizes.
    """
    check_choice("format", format, REST_FORMATS)
    if not inputs:
        raise ValueError("inputs is empty: a predict request needs at least one named input")
    columns = {name: _to_json(value) for name, value in inputs.items()}
    if format == "columnar":
        return {"signature_name": signature_name, "inputs": columns}
    for name, column in columns.items():
        if not isinstance(column, list):
            raise ValueError(
                f"format='row' needs a batch dimension, but input {name!r} is a scalar ({column!r}); "
                "use format='columnar'"
            )
    sizes = {name: len(column) for name, column in columns.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"format='row' needs every input to have the same batch size. Received sizes: {sizes}")
    batch_size = next(iter(sizes.values()))
    instances = [{name: column[i] for name, column in columns.items()} for i in range(batch_size)]
    return {"signature_name": signature_name, "instances": instances}


# --- REST answers ---------------------------------------------------------------------------------


def _is_b64(value):
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


def _is_named(value):
    """True for a JSON object of named outputs (not a `{"b64": ...}` value)."""
    return isinstance(value, dict) and not _is_b64(value)


def _from_json(value):
    """A JSON tensor value with its text as bytes (strings re-encoded, `{"b64": ...}` decoded)."""
    if isinstance(value, str):
        # `surrogateescape` gives back the exact bytes of a non-UTF-8 string (see `_loads`).
        return value.encode("utf-8", "surrogateescape")
    if _is_b64(value):
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [_from_json(item) for item in value]
    return value


def _to_array(value):
    """A JSON tensor value as a numpy array; text as an object array of `bytes`."""
    value = _from_json(value)
    if isinstance(_first_leaf(value), bytes):
        return np.array(value, dtype=object)
    return np.asarray(value)


def _outputs_from_json(body):
    """`{output name: np.ndarray}` from a REST predict answer, row (`predictions`) or columnar (`outputs`).

    JSON numbers carry no dtype: integers come back as int64 and decimals as float64.
    A single output comes back unnamed, under `UNNAMED_OUTPUT_KEY`.
    """
    if "predictions" in body:
        predictions = body["predictions"]
        if isinstance(predictions, list) and predictions and all(_is_named(item) for item in predictions):
            return {name: _to_array([item[name] for item in predictions]) for name in predictions[0]}
        return {UNNAMED_OUTPUT_KEY: _to_array(predictions)}
    if "outputs" in body:
        outputs = body["outputs"]
        if _is_named(outputs):
            return {name: _to_array(value) for name, value in outputs.items()}
        return {UNNAMED_OUTPUT_KEY: _to_array(outputs)}
    raise KeyError(f"neither 'predictions' nor 'outputs' in the answer's keys {sorted(body)}")


def _loads(raw):
    """Parse a JSON answer, whose text may not be valid UTF-8.

    TF Serving writes string outputs' bytes into its JSON as they are (only outputs named
    `*_bytes` are base64-encoded), so an answer may not be valid UTF-8: undecodable bytes are kept
    as surrogates, which `_from_json` turns back into the same bytes.
    """
    return json.loads(raw.decode("utf-8", "surrogateescape"))


def _snippet(raw, limit=200):
    text = raw.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[:limit] + "..."


# --- Clients --------------------------------------------------------------------------------------


class RestClient:
    """Client of TF Serving's REST API (standard library only).

    Args:
        url: the server's REST address, e.g. "http://localhost:8501".
        model_name: the model's name on the server.
        version: an integer version, or None for the latest one the server has.
        signature_name: the signature `predict` runs.
        timeout: seconds to wait for connecting and for each read.
    """

    def __init__(
        self, url="http://localhost:8501", *, model_name, version=None, signature_name=DEFAULT_SIGNATURE, timeout=10.0
    ):
        self.url = url.rstrip("/")
        self.model_name = model_name
        self.version = version
        self.signature_name = signature_name
        self.timeout = timeout

    @property
    def model_url(self):
        """`<url>/v1/models/<name>[/versions/<v>]`."""
        path = f"{self.url}/v1/models/{urllib.parse.quote(self.model_name, safe='')}"
        return path if self.version is None else f"{path}/versions/{int(self.version)}"

    def predict(self, inputs, format="row"):
        """Run the signature on `inputs` (`{input name: array-like}`, see `rest_request_body`).

        Returns:
            `{output name: np.ndarray}`, or `{UNNAMED_OUTPUT_KEY: np.ndarray}` for a signature with a
            single output (TF Serving does not name it). Text is an object array of `bytes`, JSON
            integers are int64 and decimals float64.

        Raises:
            ServingError: see the module docstring.
        """
        body = rest_request_body(inputs, self.signature_name, format)
        answer = self._call("POST", f"{self.model_url}:predict", body, self.signature_name)
        try:
            return _outputs_from_json(answer)
        except (KeyError, TypeError, ValueError) as error:
            raise ServingError(f"malformed predict answer from {self._where(self.signature_name)}: {error}") from error

    def model_status(self):
        """The parsed answer of `GET /v1/models/<name>[/versions/<v>]`.

        For example `{"model_version_status": [{"version": "2", "state": "AVAILABLE", "status": {...}}]}`.
        """
        return self._call("GET", self.model_url, None, None)

    def _where(self, signature_name):
        return f"{_describe(self.model_name, self.version, signature_name)} at {self.url}"

    def _call(self, method, url, body, signature_name):
        """Send one request and parse its JSON answer; every failure becomes a `ServingError`."""
        where = self._where(signature_name)
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:  # the server answered with an error status
            raw = error.read()
            try:
                message = _loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                message = _snippet(raw) or error.reason
            raise ServingError(f"model server answered {error.code}: {message} ({where})", error.code) from error
        except urllib.error.URLError as error:  # no answer: refused, timed out while connecting, ...
            raise self._no_answer(error.reason, where) from error
        except (OSError, http.client.HTTPException) as error:  # timed out or dropped while reading
            raise self._no_answer(error, where) from error
        try:
            return _loads(raw)
        except ValueError as error:
            raise ServingError(f"model server answered with non-JSON ({where}): {_snippet(raw)!r}") from error

    def _no_answer(self, reason, where):
        if isinstance(reason, TimeoutError):
            return ServingError(f"timed out after {self.timeout} s waiting for {where}")
        if isinstance(reason, ConnectionRefusedError):
            return ServingError(f"connection refused at {self.url} ({where}): is the model server running?")
        return ServingError(f"cannot reach the model server ({where}): {reason}")


class GrpcClient:
    """Client of TF Serving's gRPC `PredictionService` (a context manager that closes its channel).

    Args:
        target: the server's gRPC address, e.g. "localhost:8500".
        model_name: the model's name on the server.
        version: an integer version, or None for the latest one the server has.
        signature_name: the signature `predict` runs.
        timeout: seconds before a call is abandoned (the gRPC deadline).
    """

    def __init__(
        self, target="localhost:8500", *, model_name, version=None, signature_name=DEFAULT_SIGNATURE, timeout=10.0
    ):
        self.target = target
        self.model_name = model_name
        self.version = version
        self.signature_name = signature_name
        self.timeout = timeout
        self._channel = grpc.insecure_channel(target)
        self._stub = prediction_service_pb2_grpc.PredictionServiceStub(self._channel)

    def predict(self, inputs):
        """Run the signature on `inputs` (`{input name: array-like}`, see `predict_request`).

        Returns:
            `{output name: np.ndarray}` with the signature's dtypes; text is an object array of `bytes`.

        Raises:
            ServingError: see the module docstring.
        """
        request = predict_request(self.model_name, inputs, self.signature_name, self.version)
        try:
            response = self._stub.Predict(request, timeout=self.timeout)
        except grpc.RpcError as error:
            raise self._error(error) from error
        return {name: tf.make_ndarray(tensor) for name, tensor in response.outputs.items()}

    def _error(self, error):
        code, details = error.code(), error.details()
        where = f"{_describe(self.model_name, self.version, self.signature_name)} at {self.target}"
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return ServingError(f"timed out after {self.timeout} s waiting for {where} ({details})", code.name)
        if code == grpc.StatusCode.UNAVAILABLE:
            return ServingError(f"cannot reach the model server ({where}): {details}", code.name)
        return ServingError(f"model server answered {code.name}: {details} ({where})", code.name)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
