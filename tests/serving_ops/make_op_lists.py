"""Write the op lists the export tests compare a SavedModel's ops against.

TF Serving runs a SavedModel only if every op type in it is registered in the model server. The
stock server links core TensorFlow and a build of tensorflow-text; TF Serving 2.12 to 2.19 link
TF Text 2.12.1 (TF Serving's own `workspace.bzl` pins it), 2.20 links TF Text 2.20.0. So the lists
this folder holds are those of TensorFlow 2.12.1 and TF Text 2.12.1: an export whose op types all
appear in them loads in every model server from 2.12 on.

Run it with the Python of an environment that has exactly the versions to list (Python 3.11):

    python -m venv /tmp/tf212 && /tmp/tf212/bin/pip install tensorflow==2.12.1 tensorflow-text==2.12.1
    /tmp/tf212/bin/python tests/serving_ops/make_op_lists.py

It writes `tf_<version>_core_ops.txt` (dots as underscores) (every op type TensorFlow registers by itself) and
`tftext_<version>_ops.txt` (the op types `import tensorflow_text` adds), one name a line, sorted,
next to this file (or into `--out`). Each list is read from TensorFlow's C API registry in a
fresh process, so the core list never includes an op that tensorflow-text registers.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

_LIST_OPS = """
import json, sys
import tensorflow as tf
if sys.argv[1] == "text":
    import tensorflow_text
    version = tensorflow_text.__version__
else:
    version = tf.__version__
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session
op_list = op_def_pb2.OpList()
op_list.ParseFromString(pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList()))
print(json.dumps({"version": version, "ops": sorted({op.name for op in op_list.op})}))
"""


def registered_ops(with_text):
    """`(version, op names)` registered by TensorFlow alone, or after `import tensorflow_text`.

    Args:
        with_text: bool; import tensorflow_text first and report its version.

    Returns:
        `(str, list of str)`.
    """
    completed = subprocess.run(
        [sys.executable, "-c", _LIST_OPS, "text" if with_text else "core"], capture_output=True, text=True, check=True
    )
    listed = json.loads(completed.stdout.strip().splitlines()[-1])
    return listed["version"], listed["ops"]


def main(argv=None):
    """Write both lists; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="folder to write to")
    args = parser.parse_args(argv)
    tf_version, core = registered_ops(with_text=False)
    text_version, with_text = registered_ops(with_text=True)
    text_ops = sorted(set(with_text) - set(core))
    lists = {f"tf_{tf_version}_core_ops": core, f"tftext_{text_version}_ops": text_ops}
    for stem, ops in lists.items():
        path = args.out / (stem.replace(".", "_") + ".txt")  # tf_2_12_1_core_ops.txt
        path.write_text("".join(f"{op}\n" for op in ops))
        print(f"{path}: {len(ops)} ops")
    return 0


if __name__ == "__main__":
    sys.exit(main())
