"""The precision a run trains in, chosen to fit the machine (`--precision auto`).

Half-precision compute is faster only where the hardware has instructions for it. bfloat16:
x86 CPUs with AVX512-BF16 or AMX-BF16 (`avx512_bf16`, `amx_bf16` in /proc/cpuinfo's flags),
NVIDIA GPUs of compute capability 8.0 (Ampere) and later, and TPUs. Elsewhere bfloat16 matmuls
are emulated, and slower than float32 (docs/training.md gives a measurement).
So `auto` means `mixed_bfloat16` where bfloat16 is native and float32 everywhere else; it never
picks `mixed_float16`, whose narrow range needs loss scaling.

Where a GPU or TPU is visible, it decides (it runs the model); otherwise the CPU does. The
accelerators are those the Keras backend sees, looked up only when asked for (`visible_accelerators`);
importing this module imports no backend.

It sits at the package's top level, outside `training/` and `runs/`, because their packages import
Keras: a caller (a benchmark's parent process, say) can choose the precision before any backend
loads.
"""

import dataclasses
import platform
from pathlib import Path

CPUINFO = "/proc/cpuinfo"
AUTO = "auto"
# What computes each half-precision type natively, by kind of device.
NATIVE_CPU_FLAGS = {"bfloat16": ("avx512_bf16", "amx_bf16"), "float16": ("avx512_fp16", "amx_fp16")}
NATIVE_GPU_CAPABILITY = {"bfloat16": (8, 0), "float16": (7, 0)}  # NVIDIA compute capability
NATIVE_ON_TPU = ("bfloat16",)
_MODEL_KEYS = ("model name", "cpu model", "Hardware", "Processor")  # x86, then other architectures
_FLAG_KEYS = ("flags", "Features")  # x86, Arm
_X86_ID_KEYS = ("cpu family", "model", "stepping")  # tell apart CPUs a virtual machine names alike


def parse_cpuinfo(text):
    """The CPU model and flags of the first processor described in /proc/cpuinfo's text.

    Args:
        text: the contents of /proc/cpuinfo.

    Returns:
        `{"model": str or None, "id": str or None, "flags": [str, ...]}`, the flags sorted; `id`
        is an x86 CPU's family, model number and stepping (`"family 26 model 2 stepping 1"`),
        which tells apart generations that a virtual machine names alike ("AMD EPYC"); `None`
        and `[]` for what the text does not say.
    """
    fields = {}
    for line in text.splitlines():
        key, separator, value = line.partition(":")
        if separator:
            fields.setdefault(key.strip(), value.strip())
    model = next((fields[key] for key in _MODEL_KEYS if fields.get(key)), None)
    flags = next((fields[key].split() for key in _FLAG_KEYS if key in fields), [])
    cpu_id = None
    if all(fields.get(key) for key in _X86_ID_KEYS):
        cpu_id = "family {} model {} stepping {}".format(*(fields[key] for key in _X86_ID_KEYS))
    return {"model": model, "id": cpu_id, "flags": sorted(set(flags))}


def cpu_info(path=CPUINFO):
    """`parse_cpuinfo` of the machine's /proc/cpuinfo; without it, `platform`'s processor name.

    Args:
        path: the cpuinfo file to read.

    Returns:
        `{"model": str or None, "id": str or None, "flags": [str, ...]}`, as `parse_cpuinfo`.
    """
    try:
        info = parse_cpuinfo(Path(path).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        info = {"model": None, "id": None, "flags": []}
    if not info["model"]:
        info["model"] = platform.processor() or platform.machine() or None
    return info


def visible_accelerators():
    """The GPUs and TPUs that the Keras backend will compute on; `[]` on a CPU-only machine.

    Asks the backend in use (TensorFlow, JAX or PyTorch), importing it only now.

    Returns:
        A list of `{"kind": "GPU" or "TPU", "name": str, "compute_capability": [major, minor] or
        None}` (the capability of NVIDIA GPUs; `None` where the backend does not say).
    """
    import keras

    backend = keras.backend.backend()
    if backend == "tensorflow":
        return _tensorflow_accelerators()
    if backend == "jax":
        return _jax_accelerators()
    if backend == "torch":
        return _torch_accelerators()
    return []


def _tensorflow_accelerators():
    import tensorflow as tf

    # Physical devices: listing them does not start TensorFlow's runtime, so a strategy made
    # later can still configure it.
    found = []
    for device in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(device)
        capability = details.get("compute_capability")
        found.append(
            {
                "kind": "GPU",
                "name": details.get("device_name") or device.name,
                "compute_capability": list(capability) if capability else None,
            }
        )
    found += [
        {"kind": "TPU", "name": d.name, "compute_capability": None} for d in tf.config.list_physical_devices("TPU")
    ]
    return found


def _jax_accelerators():
    import jax

    found = []
    for device in jax.devices():  # the default backend's devices: the GPUs or TPUs when there are any
        if device.platform not in ("gpu", "tpu"):
            continue
        capability = getattr(device, "compute_capability", None)  # "8.0" on CUDA GPUs
        found.append(
            {
                "kind": device.platform.upper(),
                "name": device.device_kind,
                "compute_capability": [int(part) for part in str(capability).split(".")[:2]] if capability else None,
            }
        )
    return found


def _torch_accelerators():
    import torch

    if not torch.cuda.is_available():
        return []
    return [
        {
            "kind": "GPU",
            "name": torch.cuda.get_device_name(index),
            "compute_capability": list(torch.cuda.get_device_capability(index)),
        }
        for index in range(torch.cuda.device_count())
    ]


def native_support(half, cpu, accelerators):
    """Whether the machine computes `half` natively, and why, in words.

    Args:
        half: "bfloat16" or "float16".
        cpu: a `cpu_info()` result.
        accelerators: a `visible_accelerators()` result.

    Returns:
        `(native, why)`, e.g. `(False, "the CPU has no avx512_bf16/amx_bf16 (AMD EPYC 7B13)")`.
    """
    tpus = [device for device in accelerators if device["kind"] == "TPU"]
    gpus = [device for device in accelerators if device["kind"] == "GPU"]
    if tpus:
        native = half in NATIVE_ON_TPU
        return native, f"the TPU {'computes' if native else 'does not compute'} {half} natively ({tpus[0]['name']})"
    if gpus:
        needed = NATIVE_GPU_CAPABILITY[half]
        needed_text = ".".join(map(str, needed))
        for gpu in gpus:  # every replica must have it: the slowest sets the pace
            capability = gpu["compute_capability"]
            if capability is None:
                return False, f"the GPU's compute capability is unknown ({gpu['name']}), {half} needs {needed_text}"
            if tuple(capability) < needed:
                return False, (
                    f"the GPU has compute capability {'.'.join(map(str, capability))}, below the {needed_text} "
                    f"{half} needs ({gpu['name']})"
                )
        capability = ".".join(map(str, gpus[0]["compute_capability"]))
        count = f"{len(gpus)} GPUs" if len(gpus) > 1 else "the GPU"
        verb = "compute" if len(gpus) > 1 else "computes"
        return True, f"{count} of compute capability {capability} {verb} {half} natively ({gpus[0]['name']})"
    flags = NATIVE_CPU_FLAGS[half]
    present = [flag for flag in flags if flag in cpu["flags"]]
    model = cpu["model"] or "unknown model"
    if present:
        return True, f"the CPU has {'/'.join(present)} ({model})"
    return False, f"the CPU has no {'/'.join(flags)} ({model})"


@dataclasses.dataclass(frozen=True)
class PrecisionChoice:
    """The dtype policy a run trains in, and why.

    Attributes:
        requested: what was asked for: "auto" or a policy name.
        policy: the Keras dtype policy used: "float32", "mixed_bfloat16" or "mixed_float16".
        reason: why, in words.
        warning: one line when the policy was asked for explicitly and is slow on this machine
            (half precision that the hardware only emulates); `None` otherwise.
    """

    requested: str
    policy: str
    reason: str
    warning: str = None

    def describe(self):
        """One line for a log, e.g. `"float32 (auto: the CPU has no avx512_bf16/amx_bf16 (AMD EPYC))"`."""
        label = f"{self.requested}: {self.reason}" if self.requested == AUTO else self.reason
        return f"{self.policy} ({label})"

    def to_dict(self):
        """The fields as a JSON object (without `warning` when there is none)."""
        values = dataclasses.asdict(self)
        if values["warning"] is None:
            del values["warning"]
        return values


def choose_precision(requested, cpu=None, accelerators=None):
    """The dtype policy for `requested`: "auto" resolved for this machine, any other name kept.

    Args:
        requested: "auto", "float32", "mixed_bfloat16" or "mixed_float16".
        cpu: a `cpu_info()` result; read from /proc/cpuinfo when `None`.
        accelerators: a `visible_accelerators()` result; asked of the Keras backend when `None`.

    Returns:
        A `PrecisionChoice`. `auto` gives mixed_bfloat16 where `native_support("bfloat16", ...)`
        holds and float32 elsewhere. An explicit mixed policy that the machine does not compute
        natively is kept, with a `warning`.
    """
    cpu = cpu_info() if cpu is None else cpu
    accelerators = visible_accelerators() if accelerators is None else accelerators
    bfloat16_native, bfloat16_why = native_support("bfloat16", cpu, accelerators)
    auto_policy = "mixed_bfloat16" if bfloat16_native else "float32"
    if requested == AUTO:
        return PrecisionChoice(AUTO, auto_policy, bfloat16_why)
    if not requested.startswith("mixed_"):
        return PrecisionChoice(requested, requested, "requested")
    half = requested.removeprefix("mixed_")
    native, why = native_support(half, cpu, accelerators)
    warning = None
    if not native:
        warning = (
            f"warning: {requested}, but {why}: {half} is not native here, so this run will be slower than in "
            f"float32, on a CPU many times slower (auto would choose {auto_policy})"
        )
    return PrecisionChoice(requested, requested, "requested", warning)
