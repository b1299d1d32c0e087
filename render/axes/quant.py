"""The quantization axis: weights quantized at load, through diffusers' `PipelineQuantizationConfig`.

Quantization replaces the weights themselves, so it cannot be undone in place: it is a load-time
choice, and the pipeline cache keys loaded pipelines by it (a cell with another quantization gets
its own load; the unquantized pipeline never sees quantized weights).

| option | backend | what | runs on |
| --- | --- | --- | --- |
| int8wo | torchao | int8 weights, per-channel scales; activations stay in the compute dtype | CPU, CUDA |
| int8dq | torchao | int8 weights and dynamically quantized int8 activations | CPU, CUDA |
| fp8wo | torchao | float8 (e4m3) weights, dequantized per matmul | CPU (slow), CUDA |
| fp8dq | torchao | float8 weights and activations, row-wise scales (torch._scaled_mm) | CUDA, compute capability >= 8.9 |
| quanto-int8 | optimum-quanto | int8 weights | CPU, CUDA |
| nf4 | bitsandbytes | 4-bit NormalFloat weights, compute in the model dtype | CUDA |
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from render.axes.base import OptionAxis, Where
from render.axes.errors import AxisError
from render.compose.spec import Cell

EXTRA_BY_PACKAGE = {"torchao": "quant", "optimum.quanto": "quant", "bitsandbytes": "bnb"}


@dataclass(frozen=True)
class QuantMethod:
    backend: str  # torchao | quanto | bitsandbytes
    package: str  # import name of the backend
    needs_cuda: bool = False
    min_capability: Optional[tuple[int, int]] = None  # CUDA compute capability the kernels need
    dtypes: Optional[tuple[str, ...]] = None  # the weights dtypes it quantizes (None: any)
    cpu_runs: bool = True  # the backend has a CPU path


QUANT_METHODS: Dict[str, QuantMethod] = {
    "int8wo": QuantMethod("torchao", "torchao"),
    "int8dq": QuantMethod("torchao", "torchao"),
    "fp8wo": QuantMethod("torchao", "torchao"),
    # torchao asserts "Float8 dynamic quantization requires CUDA compute capability >= 8.9" (no CPU path)
    # and "PerRow quantization only works for bfloat16 precision input weight"
    "fp8dq": QuantMethod("torchao", "torchao", needs_cuda=True, min_capability=(8, 9), dtypes=("bfloat16",)),
    "quanto-int8": QuantMethod("quanto", "optimum.quanto"),
    "nf4": QuantMethod("bitsandbytes", "bitsandbytes", needs_cuda=True),
}
QUANT_NAMES = ("none", *QUANT_METHODS)


@dataclass
class QuantConf:
    """Weights quantization at load (conf/quant/)."""

    name: str = "none"  # none | int8wo | int8dq | fp8wo | fp8dq | quanto-int8 | nf4
    components: List[str] = field(default_factory=lambda: ["transformer"])  # pipeline components to quantize

    def __post_init__(self) -> None:
        if self.name not in QUANT_NAMES:
            raise AxisError(f"quant={self.name}: valid values are {', '.join(QUANT_NAMES)}")
        if self.name != "none" and not self.components:
            raise AxisError(f"quant={self.name} with quant.components=[]: name at least one component, e.g. [transformer]")


def _torchao_config(name: str) -> Any:
    """torchao's config for an option. `set_inductor_config=False`: torchao's default turns on inductor's
    coordinate-descent tuning for the whole process and never turns it off, so every cell compiled after a quantized
    one in the same process (a sweep, a side-by-side round) would compile, and be timed, differently."""
    from torchao import quantization as q

    return {
        "int8wo": lambda: q.Int8WeightOnlyConfig(set_inductor_config=False),
        "int8dq": lambda: q.Int8DynamicActivationInt8WeightConfig(set_inductor_config=False),
        "fp8wo": lambda: q.Float8WeightOnlyConfig(set_inductor_config=False),
        "fp8dq": lambda: q.Float8DynamicActivationFloat8WeightConfig(granularity=q.PerRow(), set_inductor_config=False),
    }[name]()


def _component_config(name: str, library: str, dtype: Any) -> Any:
    """The quantization config of one component; `library` is where its class lives (diffusers, transformers)."""
    lib: Any
    if library == "transformers":
        import transformers as lib
    else:
        import diffusers as lib
    backend = QUANT_METHODS[name].backend
    if backend == "torchao":
        return lib.TorchAoConfig(_torchao_config(name))
    if backend == "quanto":
        if library == "transformers":
            return lib.QuantoConfig(weights="int8")
        return lib.QuantoConfig(weights_dtype="int8")
    return lib.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype)


def pipeline_quantization(conf: QuantConf, component_libraries: Dict[str, str], dtype: Any) -> Any:
    """diffusers' `PipelineQuantizationConfig` for `conf`, or None for quant=none.

    `component_libraries` maps each component to the library its class comes from (model_index.json);
    a mapping per component is used because diffusers' and transformers' config classes differ.
    """
    if conf.name == "none":
        return None
    from diffusers import PipelineQuantizationConfig

    missing = [c for c in conf.components if c not in component_libraries]
    if missing:
        raise AxisError(f"quant.components={list(conf.components)}: {', '.join(missing)} is not a component of this "
                         f"pipeline; components: {', '.join(sorted(component_libraries))}")
    mapping = {c: _component_config(conf.name, component_libraries[c], dtype) for c in conf.components}
    return PipelineQuantizationConfig(quant_mapping=mapping)


def check_quant(conf: QuantConf, *, device_kind: str, capability: Optional[tuple[int, int]],
                components: Optional[List[str]], dtype: Optional[str] = None) -> None:
    """ValueError naming why `conf` cannot run here: no CUDA, too old a GPU, a weights dtype it does not quantize,
    a missing package, an unknown component."""
    if conf.name == "none":
        return
    method = QUANT_METHODS[conf.name]
    if method.needs_cuda and device_kind == "cpu":
        runs = [n for n, m in QUANT_METHODS.items() if not m.needs_cuda]
        raise AxisError(f"quant={conf.name} ({method.backend}) needs a CUDA GPU and this cell runs on the CPU; "
                         f"on the CPU: quant={', '.join(runs)}")
    if method.min_capability and capability is not None and capability < method.min_capability:
        need = ".".join(map(str, method.min_capability))
        raise AxisError(f"quant={conf.name} needs a GPU of compute capability >= {need} (this one: "
                         f"{capability[0]}.{capability[1]}); use quant=fp8wo or int8dq")
    if method.dtypes and dtype is not None and dtype not in method.dtypes:
        raise AxisError(f"quant={conf.name} quantizes {' or '.join(method.dtypes)} weights and this cell's dtype is "
                         f"{dtype}: set dtype={method.dtypes[0]}, or use quant=fp8wo or int8wo")
    if _missing(method.package):
        extra = EXTRA_BY_PACKAGE[method.package]
        raise AxisError(f"quant={conf.name} needs the package {method.package!r}: pip install 'hypergrid[{extra}]'")
    if components is not None:
        unknown = [c for c in conf.components if c not in components]
        if unknown:
            raise AxisError(f"quant.components={list(conf.components)}: {', '.join(unknown)} is not a component of "
                             f"this pipeline; components: {', '.join(sorted(components))}")


def _missing(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is None
    except ModuleNotFoundError:  # the parent package (optimum) is missing
        return True


def quantize_in_place(module: Any, name: str) -> None:
    """Quantize an in-memory module with a torchao option (what `pipeline_quantization` does at load), for
    models built from a config rather than loaded (benchmarks/gpu_check.py)."""
    if QUANT_METHODS[name].backend != "torchao":
        raise AxisError(f"quant={name}: only the torchao options quantize a module in place; use them or load with quant={name}")
    from torchao.quantization import quantize_

    quantize_(module, _torchao_config(name))


def kernel_note(value: Any) -> str:
    """For a cell that failed: the torchao kernels this process could not load when its quantization is torchao's
    (the entry points drop those warnings, render.run.quiet, and hold them for this), else ""."""
    name = value.get("name", "none") if isinstance(value, dict) else "none"
    if name not in QUANT_METHODS or QUANT_METHODS[name].backend != "torchao":
        return ""
    from render.run.quiet import held

    failed = held("torchao", "torchao.kernel.intmm")
    return f"; torchao could not load its kernels at import: {' | '.join(failed)}" if failed else ""


def tensor_bytes(tensor: Any) -> int:
    """Bytes a (possibly quantized) tensor holds: the inner tensors of a tensor subclass (torchao, quanto)."""
    flatten = getattr(tensor, "__tensor_flatten__", None)
    if flatten is not None:
        names, _ = flatten()
        return sum(tensor_bytes(getattr(tensor, n)) for n in names if getattr(tensor, n) is not None)
    return tensor.numel() * tensor.element_size()


def weights_bytes(pipe: Any) -> int:
    """The pipeline's weights footprint: every parameter and buffer of every component, as stored."""
    import torch

    total = 0
    for component in pipe.components.values():
        if isinstance(component, torch.nn.Module):
            total += sum(tensor_bytes(t) for t in component.parameters())
            total += sum(tensor_bytes(t) for t in component.buffers())
    return total


def component_libraries(source: str) -> Dict[str, str]:
    """component -> library its class comes from, read from the pipeline's model_index.json."""
    from diffusers import DiffusionPipeline

    index = DiffusionPipeline.load_config(source)
    return {k: v[0] for k, v in index.items() if isinstance(v, (list, tuple)) and len(v) == 2 and v[0] is not None}


class QuantAxis(OptionAxis):
    """Applied at load: quantized weights cannot be undone in place, so they key the pipeline cache."""

    name = "quant"
    help = "weight quantization applied at load: torchao int8/fp8, quanto, bitsandbytes nf4 (docs/axes.md)"
    schema = QuantConf

    def load_key(self, value: Any) -> Any:
        return value if value["name"] != "none" else None

    def load_kwargs(self, value: Any, source: str, dtype: Any) -> Dict[str, Any]:
        return {"quantization_config": pipeline_quantization(self.conf(value), component_libraries(source), dtype)}

    def check(self, value: Any, cell: Cell, where: Where) -> None:
        if value["name"] != "none":
            check_quant(self.conf(value), device_kind=where.device_kind, capability=where.capability,
                        components=list(where.pipeline.components), dtype=cell.model.dtype)


AXIS = QuantAxis()
