"""TEST STAND-IN for the TF Serving model server, used to exercise `keras_transformer.export.clients`.

The real `tensorflow_model_server` binary cannot be installed here (it is not on the package
registries), so this module imitates the parts of it the clients use, in Python, on loopback:

- it loads every version `base_path/<int>/saved_model.pb` of each model with
  `tf.saved_model.load`; a request without a version gets the highest, any loaded version can be
  asked for explicitly;
- REST (`http.server.ThreadingHTTPServer`): `POST /v1/models/<name>[/versions/<v>]:predict` in row
  ("instances") and columnar ("inputs") format, and `GET /v1/models/<name>[/versions/<v>]`;
- gRPC: `PredictionService.Predict`.

Formats, status codes and error messages follow TF Serving's sources (`util/json_tensor.cc`,
`model_servers/http_rest_api_handler.cc`, `servables/tensorflow/predict_util.cc`), including two
details a client must survive: a signature with one output answers REST without the output's name,
and string outputs go into the JSON as raw bytes (valid UTF-8 or not) unless the output's name ends
in `_bytes`, which are sent as `{"b64": ...}`. As in TF Serving, gRPC inputs must already have the
signature's dtypes, while REST inputs (JSON has no dtypes) are converted to them. Request batching
as TF Serving's `--enable_batching` does it, when asked for (`Batching`): concurrent requests to one
signature are run as one batch, padded to an allowed batch size. Not imitated: version labels,
model metadata, classify/regress, config reloading.

    with StandInServer({"toy": "/path/to/saved_models/toy"}) as server:
        RestClient(server.rest_url, model_name="toy").predict(...)
        GrpcClient(server.grpc_target, model_name="toy").predict(...)
"""

import base64
import json
import re
import threading
import time
import urllib.parse
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

DEFAULT_SIGNATURE = "serving_default"
# TF Serving's status -> HTTP code mapping (`model_servers/http_server.cc`), for the codes used here.
HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.NOT_FOUND: 404,
}
PREDICT_PATH = re.compile(r"/v1/models/([^/:]+)(?:/versions/(\d+))?:predict", re.IGNORECASE)
STATUS_PATH = re.compile(r"/v1/models/([^/:]+)(?:/versions/(\d+))?", re.IGNORECASE)


class ServingStatus(Exception):
    """A failed request: gRPC status code and TF Serving's message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def invalid(message):
    """An INVALID_ARGUMENT `ServingStatus` with TF Serving's `message`."""
    return ServingStatus(grpc.StatusCode.INVALID_ARGUMENT, message)


class Batching:
    """TF Serving's request batching (its `batching_parameters_file`'s settings), imitated.

    Requests to one signature that arrive while a batch is forming are run as one call: the batch
    closes at `max_batch_size` rows or `batch_timeout_micros` after its first request, its inputs
    are concatenated (a longer second axis padded with 0 or b""), its rows padded to the next of
    `allowed_batch_sizes`, and each request gets its own rows of the outputs. A batch that fails
    is run again request by request, so that one bad request fails alone. One batching thread.

    Attributes: `batch_sizes`, the rows of each batch run (before padding), for tests and reports.
    """

    def __init__(self, max_batch_size=8, batch_timeout_micros=2000, allowed_batch_sizes=(1, 2, 4, 8)):
        if not allowed_batch_sizes or sorted(allowed_batch_sizes)[-1] != max_batch_size:
            raise ValueError(
                f"allowed_batch_sizes must end with max_batch_size={max_batch_size}. Received: {allowed_batch_sizes}"
            )
        self.max_batch_size, self.timeout = max_batch_size, batch_timeout_micros / 1e6
        self.allowed = sorted(allowed_batch_sizes)
        self.batch_sizes = []
        self._pending = []  # [(function, tensors, rows, arrival, slot)], oldest first
        self._ready = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def run(self, function, tensors):
        """`StandInServer.call(function, tensors)` inside a batch: its outputs, or the error it raised alone."""
        if any(tensor.shape.rank == 0 for tensor in tensors.values()):
            return StandInServer.call(function, tensors)
        rows = int(next(iter(tensors.values())).shape[0])
        if not 0 < rows <= self.max_batch_size:
            return StandInServer.call(function, tensors)
        slot = {"done": threading.Event()}
        with self._ready:
            self._pending.append((function, tensors, rows, time.monotonic(), slot))
            self._ready.notify()
        slot["done"].wait()
        if "error" in slot:
            raise slot["error"]
        return slot["outputs"]

    def close(self):
        """Stop the batching thread (requests still waiting are not answered)."""
        with self._ready:
            self._stop = True
            self._ready.notify()
        self._thread.join()

    def _loop(self):
        while True:
            with self._ready:
                while not self._pending and not self._stop:
                    self._ready.wait()
                if self._stop:
                    return
                function, _, _, arrival, _ = self._pending[0]
                while not self._stop:  # until full or timed out
                    same = [item for item in self._pending if item[0] is function]
                    left = arrival + self.timeout - time.monotonic()
                    if sum(item[2] for item in same) >= self.max_batch_size or left <= 0:
                        break
                    self._ready.wait(left)
                batch, rows = [], 0
                for item in [item for item in self._pending if item[0] is function]:
                    if rows + item[2] <= self.max_batch_size:
                        batch.append(item)
                        rows += item[2]
                for item in batch:
                    self._pending.remove(item)
            self._run_batch(function, batch, rows)

    def _run_batch(self, function, batch, rows):
        self.batch_sizes.append(rows)
        size = next(allowed for allowed in self.allowed if allowed >= rows)
        try:
            outputs = StandInServer.call(function, _stack([item[1] for item in batch], size))
        except ServingStatus:
            for item in batch:  # one bad request fails alone
                try:
                    item[4]["outputs"] = StandInServer.call(function, item[1])
                except ServingStatus as error:
                    item[4]["error"] = error
                item[4]["done"].set()
            return
        start = 0
        for item in batch:
            item[4]["outputs"] = {name: value[start : start + item[2]] for name, value in outputs.items()}
            start += item[2]
            item[4]["done"].set()


def _stack(requests, size):
    """The inputs of `requests` (`[{name: tf.Tensor}]`) as one batch of `size` rows, padded with 0 or b""."""
    stacked = {}
    for name in requests[0]:
        arrays = [request[name].numpy() for request in requests]
        shape = [max(dims) for dims in zip(*(array.shape for array in arrays))]
        fill = b"" if arrays[0].dtype == object else 0
        out = np.full([size, *shape[1:]], fill, dtype=arrays[0].dtype)
        start = 0
        for array in arrays:
            out[(slice(start, start + array.shape[0]), *(slice(0, n) for n in array.shape[1:]))] = array
            start += array.shape[0]
        stacked[name] = tf.constant(out, dtype=requests[0][name].dtype)
    return stacked


class StandInServer:
    """Serves `{model name: base path}` over REST and gRPC on 127.0.0.1, on free ports.

    Args:
        models: `{model name: base path}`, each a folder of integer versions.
        batching: a `Batching`, or None to run every request on its own.

    Attributes (once started): `rest_url` ("http://127.0.0.1:<port>"), `grpc_target`
    ("127.0.0.1:<port>"), `models` (`{name: {version: loaded SavedModel}}`), `batching`.
    """

    def __init__(self, models, batching=None):
        self.models = {name: self._load_versions(Path(path)) for name, path in models.items()}
        self.rest_url = self.grpc_target = None
        self.batching = batching

    @staticmethod
    def _load_versions(base_path):
        versions = {
            int(path.name): tf.saved_model.load(str(path))
            for path in base_path.iterdir()
            if path.name.isdigit() and (path / "saved_model.pb").is_file()
        }
        if not versions:
            raise FileNotFoundError(f"No <int version>/saved_model.pb under {base_path}")
        return versions

    def __enter__(self):
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _RestHandler)
        self._http.stand_in = self
        self._http_thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._http_thread.start()
        self.rest_url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(_PredictionServicer(self), self._grpc)
        self.grpc_target = f"127.0.0.1:{self._grpc.add_insecure_port('127.0.0.1:0')}"
        self._grpc.start()
        return self

    def __exit__(self, *exc_info):
        if self.batching is not None:
            self.batching.close()
        self._grpc.stop(grace=None).wait()
        self._http.shutdown()
        self._http.server_close()
        self._http_thread.join()

    # --- What both surfaces share ---------------------------------------------------------------

    def servable(self, model_name, version):
        """`(version, loaded SavedModel)`; the highest version when `version` is None."""
        versions = self.models.get(model_name, {})
        if version is None and versions:
            version = max(versions)
        if version not in versions:
            request = f"Latest({model_name})" if version is None else f"Specific({model_name}, {version})"
            raise ServingStatus(grpc.StatusCode.NOT_FOUND, f"Servable not found for request: {request}")
        return version, versions[version]

    def model_status(self, model_name, version):
        """TF Serving's `GetModelStatusResponse` as JSON, highest version first."""
        versions = sorted(self.models.get(model_name, {}), reverse=True)
        if version is not None:
            if version not in versions:
                message = f"Could not find version {version} of model {model_name}"
                raise ServingStatus(grpc.StatusCode.NOT_FOUND, message)
            versions = [version]
        if not versions:
            raise ServingStatus(grpc.StatusCode.NOT_FOUND, f"Could not find any versions of model {model_name}")
        ok = {"error_code": "OK", "error_message": ""}
        return {"model_version_status": [{"version": str(v), "state": "AVAILABLE", "status": ok} for v in versions]}

    @staticmethod
    def signature(loaded, signature_name, rest):
        """The loaded signature; a missing one is INVALID_ARGUMENT over REST, FAILED_PRECONDITION over gRPC."""
        if signature_name in loaded.signatures:
            return loaded.signatures[signature_name]
        if rest:
            raise invalid(f'Serving signature name: "{signature_name}" not found in signature def')
        raise ServingStatus(grpc.StatusCode.FAILED_PRECONDITION, f'Serving signature key "{signature_name}" not found.')

    @staticmethod
    def input_specs(function):
        """`{input name: tf.TensorSpec}` of a loaded signature."""
        return function.structured_input_signature[1]

    def run(self, function, tensors):
        """Call a signature on `{input name: tf.Tensor}` (in a batch when batching); `{output name: np.ndarray}`."""
        self.check_inputs(function, tensors)
        if self.batching is None:
            return self.call(function, tensors)
        return self.batching.run(function, tensors)

    @staticmethod
    def check_inputs(function, tensors):
        """Raise TF Serving's INVALID_ARGUMENT for inputs the signature does not take."""
        specs = StandInServer.input_specs(function)
        missing, extra = sorted(set(specs) - set(tensors)), sorted(set(tensors) - set(specs))
        if extra:
            raise invalid(
                f"input tensor alias not found in signature: {extra[0]}. "
                f"Inputs expected to be in the set {{{','.join(sorted(specs))}}}."
            )
        if missing:
            raise invalid(f"input size does not match signature: missing inputs {missing}")
        for name, tensor in tensors.items():
            if tensor.dtype != specs[name].dtype:
                raise invalid(f"Expects arg[{name}] to be {specs[name].dtype.name} but {tensor.dtype.name} is provided")
            if not specs[name].shape.is_compatible_with(tensor.shape):
                raise invalid(f"input {name}: shape {tensor.shape} is not compatible with {specs[name].shape}")

    @staticmethod
    def call(function, tensors):
        """Run a signature on checked inputs; `{output name: np.ndarray}`, INVALID_ARGUMENT if the graph fails."""
        try:
            outputs = function(**tensors)
        except tf.errors.InvalidArgumentError as error:  # raised while running the graph
            raise invalid(error.message) from None
        return {name: value.numpy() for name, value in outputs.items()}


# --- REST -----------------------------------------------------------------------------------------


def _is_b64(value):
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


def _json_to_tensor(name, value, dtype):
    """A JSON value (nested lists) as a tensor of the signature's `dtype`, checked like TF Serving."""

    def leaf(item):
        if isinstance(item, list):
            return [leaf(element) for element in item]
        if dtype == tf.string and _is_b64(item):
            return base64.b64decode(item["b64"])
        expected = {tf.string: str, tf.bool: bool}.get(dtype, int if dtype.is_integer else (int, float))
        if not isinstance(item, expected) or (dtype != tf.bool and isinstance(item, bool)):
            raise invalid(f"JSON Value: {json.dumps(item)} is not of expected type: {dtype.name} (input {name})")
        return item.encode("utf-8", "surrogateescape") if isinstance(item, str) else item

    try:
        return tf.constant(leaf(value), dtype=dtype)
    except (ValueError, TypeError) as error:  # ragged lists, out-of-range numbers
        raise invalid(f"Failed to convert input {name}: {error}") from None


def _tensor_to_json(name, array):
    """An output as JSON like TF Serving: raw text, `{"b64": ...}` for outputs named `*_bytes`."""
    as_b64 = name.endswith("_bytes")

    def convert(item):
        if isinstance(item, list):
            return [convert(element) for element in item]
        if isinstance(item, bytes):  # decoded so that `_dumps` writes exactly these bytes
            return {"b64": base64.b64encode(item).decode()} if as_b64 else item.decode("utf-8", "surrogateescape")
        return item

    return convert(array.tolist())


def _dumps(body):
    """JSON bytes; strings' bytes are written as they are, valid UTF-8 or not (as rapidjson does)."""
    return json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogateescape")


def _rest_predict(stand_in, model_name, version, raw):
    """Answer a REST predict body; the order of checks follows `FillPredictRequestFromJson`."""
    try:
        body = json.loads(raw.decode("utf-8", "surrogateescape"))
    except ValueError as error:
        raise invalid(f"JSON Parse error: {error}") from None
    if not isinstance(body, dict):
        raise invalid(f"JSON Value: {raw[:100]!r} Is not object")
    signature_name = body.get("signature_name", DEFAULT_SIGNATURE)
    if not isinstance(signature_name, str):
        raise invalid("'signature_name' key must be a string value.")
    _, loaded = stand_in.servable(model_name, version)
    function = stand_in.signature(loaded, signature_name, rest=True)
    specs = stand_in.input_specs(function)
    if ("instances" in body) == ("inputs" in body):
        raise invalid(
            "Missing 'inputs' or 'instances' key" if "inputs" not in body else "Not both 'inputs' and 'instances'"
        )
    if "instances" in body:
        instances = body["instances"]
        if not isinstance(instances, list) or not instances:
            raise invalid("Expecting 'instances' to be a non-empty list/array")
        named = isinstance(instances[0], dict) and not _is_b64(instances[0])
        if not named and len(specs) > 1:
            raise invalid("instances is a plain list, but expecting list of objects as multiple input tensors required")
        if named:
            for index, instance in enumerate(instances):
                for key in instance:
                    if key not in specs:
                        raise invalid(
                            f"Failed to process element: {index} key: {key} of 'instances' list. "
                            f"Error: INVALID_ARGUMENT: JSON object: does not have named input: {key}"
                        )
                if set(instance) != set(specs):
                    raise invalid(
                        f"Failed to process element: {index} of 'instances' list. "
                        f"JSON object must only have keys: {','.join(sorted(specs))}"
                    )
            columns = {name: [instance[name] for instance in instances] for name in specs}
        else:
            columns = {next(iter(specs)): instances}
    else:
        inputs = body["inputs"]
        if isinstance(inputs, dict) and not _is_b64(inputs):
            for name in specs:  # like TF Serving, keys that are not inputs are ignored
                if name not in inputs:
                    raise invalid(f"Missing named input: {name} in 'inputs' object.")
            columns = {name: inputs[name] for name in specs}
        elif len(specs) > 1:
            raise invalid("inputs is a plain value/list, but expecting an object as multiple input tensors required")
        else:
            columns = {next(iter(specs)): inputs}
    tensors = {name: _json_to_tensor(name, value, specs[name].dtype) for name, value in columns.items()}
    outputs = stand_in.run(function, tensors)
    if "inputs" in body:
        if len(outputs) == 1:
            return {"outputs": _tensor_to_json(*next(iter(outputs.items())))}
        return {"outputs": {name: _tensor_to_json(name, array) for name, array in outputs.items()}}
    batch_sizes = {name: array.shape[0] if array.ndim else 0 for name, array in outputs.items()}
    batch_size = max(batch_sizes.values())
    if set(batch_sizes.values()) != {batch_size} or batch_size < 1:
        raise invalid(f"Outputs have no common batch size for the row format: {batch_sizes}")
    rows = {name: _tensor_to_json(name, array) for name, array in outputs.items()}
    if len(rows) == 1:
        return {"predictions": next(iter(rows.values()))}
    return {"predictions": [{name: rows[name][i] for name in rows} for i in range(batch_size)]}


class _RestHandler(BaseHTTPRequestHandler):
    """Routes TF Serving's REST paths to the stand-in; errors are `{"error": message}`."""

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer(PREDICT_PATH, lambda name, version: _rest_predict(self.server.stand_in, name, version, body))

    def do_GET(self):
        self._answer(STATUS_PATH, self.server.stand_in.model_status)

    def _answer(self, path_pattern, handle):
        match = path_pattern.fullmatch(self.path)
        try:
            if match is None:
                raise invalid(f"Malformed request: {self.command} {self.path}")
            version = None if match.group(2) is None else int(match.group(2))
            status, body = 200, handle(urllib.parse.unquote(match.group(1)), version)
        except ServingStatus as error:
            status, body = HTTP_STATUS.get(error.code, 500), {"error": error.message}
        payload = _dumps(body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format, *args):  # keep test output quiet
        pass


# --- gRPC -----------------------------------------------------------------------------------------


class _PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, stand_in):
        self.stand_in = stand_in

    def Predict(self, request, context):
        spec = request.model_spec
        signature_name = spec.signature_name or DEFAULT_SIGNATURE
        try:
            requested = spec.version.value if spec.HasField("version") else None
            version, loaded = self.stand_in.servable(spec.name, requested)
            function = self.stand_in.signature(loaded, signature_name, rest=False)
            tensors = {name: tf.constant(tf.make_ndarray(proto)) for name, proto in request.inputs.items()}
            outputs = self.stand_in.run(function, tensors)
        except ServingStatus as error:
            context.abort(error.code, error.message)
        response = predict_pb2.PredictResponse()
        response.model_spec.name = spec.name
        response.model_spec.version.value = version
        response.model_spec.signature_name = signature_name
        for name, array in outputs.items():
            if not request.output_filter or name in request.output_filter:
                response.outputs[name].CopyFrom(tf.make_tensor_proto(array))
        return response


def main(argv=None):
    """Serve models in this process until its standard input closes.

    `python -m benchmarks.harness.stand_in_server NAME=BASE_PATH [NAME=BASE_PATH ...]` prints one
    JSON line, `{"rest_url": ..., "grpc_target": ...}`, once it serves, then serves until the
    process that started it closes its standard input (or it is killed).
    """
    import argparse
    import json
    import sys

    import tensorflow_text  # noqa: F401  (registers the tokenizer ops of a text export)

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", metavar="NAME=BASE_PATH", help="a model's name and its folder of versions")
    parser.add_argument("--max-batch-size", type=int, default=0, help="batch concurrent requests (0: never)")
    parser.add_argument("--batch-timeout-micros", type=int, default=2000, help="how long a batch waits to fill")
    args = parser.parse_args(argv)
    if not all("=" in model for model in args.models):
        parser.error(f"each model is NAME=BASE_PATH. Received: {args.models}")
    batching = None
    if args.max_batch_size > 0:  # allowed sizes: the powers of 2 below it, and it
        sizes = sorted({min(2**i, args.max_batch_size) for i in range(args.max_batch_size.bit_length() + 1)})
        batching = Batching(args.max_batch_size, args.batch_timeout_micros, sizes)
    with StandInServer(dict(model.split("=", 1) for model in args.models), batching) as server:
        print(json.dumps({"rest_url": server.rest_url, "grpc_target": server.grpc_target}), flush=True)
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
