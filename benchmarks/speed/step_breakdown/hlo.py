"""XLA's optimized HLO, dumped by the run: what each op of the compiled step is (a matmul, an attention kernel, ...)."""

import collections
import re
from pathlib import Path

INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+) = .*?\b(?P<opcode>[a-z][a-z0-9\-]*)\(")
COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?(?P<name>[\w.\-]+) .*\{\s*$")
MATMUL_OPCODES = {"dot", "convolution"}


def parse_hlo(text):
    """The instructions of an optimized HLO module's text: `{name: {"opcode", "op_name", "kind"}}`.

    `kind` is "matmul" for a dot or convolution, a fusion whose computations hold one, or a
    library call to a matmul (cuBLAS, oneDNN); "attention kernel" for a fused attention call
    (cuDNN's flash attention); "other" for the rest.
    """
    opcodes, calls, instructions, current = collections.defaultdict(set), collections.defaultdict(set), {}, None
    for line in text.splitlines():
        header = COMPUTATION.match(line)
        if header and " = " not in line:
            current = header.group("name")
            continue
        match = INSTRUCTION.match(line)
        if not match or current is None:
            continue
        name, opcode = match.group("name"), match.group("opcode")
        target = re.search(r'custom_call_target="([^"]+)"', line)
        if opcode == "custom-call" and target:
            opcode = f"custom-call:{target.group(1)}"
        called = set(re.findall(r"(?:calls|to_apply)=%?([\w.\-]+)", line))
        opcodes[current].add(opcode)
        calls[current] |= called
        op_name = re.search(r'op_name="([^"]*)"', line)
        instructions[name] = {"opcode": opcode, "op_name": op_name.group(1) if op_name else "", "calls": called}

    def under(computations, seen):
        found = set()
        for computation in computations - seen:
            seen.add(computation)
            found |= opcodes[computation] | under(calls[computation], seen)
        return found

    for info in instructions.values():
        info["kind"] = op_kind({info["opcode"]} | under(info.pop("calls"), set()))
    return instructions


def op_kind(opcodes):
    """The kind of an op, "matmul", "attention kernel" or "other", from the opcodes it runs (see `parse_hlo`)."""
    library_calls = " ".join(opcode for opcode in opcodes if opcode.startswith("custom-call")).lower()
    if any(word in library_calls for word in ("fmha", "attention", "flash")):
        return "attention kernel"
    if opcodes & MATMUL_OPCODES or any(word in library_calls for word in ("gemm", "matmul", "cublas", "onednn")):
        return "matmul"
    return "other"


def compiled_modules(dump_dir):
    """`{program_id: instructions}` of every train-step module XLA dumped into `dump_dir` (`parse_hlo`)."""
    modules = {}
    for path in Path(dump_dir).glob("module_*train_step*after_optimizations.txt"):
        program_id = int(path.name.split(".")[0].removeprefix("module_"))
        modules[program_id] = parse_hlo(path.read_text())
    return modules
