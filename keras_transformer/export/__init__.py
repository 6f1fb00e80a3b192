"""Serving a trained model: SavedModel exports in TF Serving's layout, and clients for the server.

`savedmodel`: TF Serving's layout, the signatures' names, versions, warm-up requests and
`models.config`; `integrity`: each version's checksums and what is wrong with a damaged one;
`translation`: `Translator` and `IdsTranslator`; `language`: `TextGenerator`, `IdsGenerator` and
`MaskFiller`. `clients`: REST and gRPC clients of a TF Serving model server, and the request
bodies they send. Every public name of them is importable from here.
"""

from keras_transformer.export.clients import (
    DEFAULT_SIGNATURE,
    REST_FORMATS,
    UNNAMED_OUTPUT_KEY,
    GrpcClient,
    RestClient,
    ServingError,
    predict_request,
    rest_request_body,
)
from keras_transformer.export.integrity import CHECKSUMS_FILE, DamagedExportError, version_problems, write_checksums
from keras_transformer.export.language import IdsGenerator, MaskFiller, TextGenerator
from keras_transformer.export.savedmodel import (
    GENERATE_IDS_SIGNATURE_KEY,
    IDS_SIGNATURE_KEY,
    MAX_TEXT_BYTES,
    MODELS_CONFIG_FILE,
    SIGNATURE_KEY,
    WARMUP_FILE,
    ExportModule,
    export_module,
    export_translator,
    latest_version_dir,
    next_version,
    saved_model_op_types,
    write_models_config,
    write_warmup_requests,
)
from keras_transformer.export.translation import IdsTranslator, Translator

__all__ = [
    "CHECKSUMS_FILE",
    "DEFAULT_SIGNATURE",
    "GENERATE_IDS_SIGNATURE_KEY",
    "IDS_SIGNATURE_KEY",
    "MAX_TEXT_BYTES",
    "MODELS_CONFIG_FILE",
    "REST_FORMATS",
    "SIGNATURE_KEY",
    "UNNAMED_OUTPUT_KEY",
    "WARMUP_FILE",
    "DamagedExportError",
    "ExportModule",
    "GrpcClient",
    "IdsGenerator",
    "IdsTranslator",
    "MaskFiller",
    "RestClient",
    "ServingError",
    "TextGenerator",
    "Translator",
    "export_module",
    "export_translator",
    "latest_version_dir",
    "next_version",
    "predict_request",
    "rest_request_body",
    "saved_model_op_types",
    "version_problems",
    "write_checksums",
    "write_models_config",
    "write_warmup_requests",
]
