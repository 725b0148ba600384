"""Triton backend: one fused kernel for gather → channel-wise tensor product → scatter-sum.

For every edge tile and channel tile, the kernel loads the sender features, the edge
spherical harmonics and the per-edge weights, forms each path's output from the non-zero
Clebsch–Gordan coefficients (unrolled at code-generation time from the
:class:`~atomistic.kernels.spec.ConvolutionSpec`) and adds it into the receiver with atomic
adds: per-edge messages are never written to memory.  The backward kernel recomputes the
couplings and produces the gradients with respect to the node features (atomic adds into the
senders), the edge attributes (reduced over channels) and the per-edge weights, which is what
forces and stress need.

Both kernels are ``torch.library`` custom operators (``atomistic::fused_convolution`` and
``atomistic::fused_convolution_backward``) with a registered autograd formula, so they compose
with autograd and ``torch.compile``.  Double backward (training with a force loss): the
convolution ``T`` is trilinear in (node features, edge attributes, edge weights), so the
derivative of its vector–Jacobian product is the same two kernels at swapped arguments (the
rule of ``_backward_of_backward``, as in the ``cpu`` backend); it stays fused.

The kernels run on CUDA, and on CPU under the Triton interpreter (``TRITON_INTERPRET=1``),
which is how the parity tests exercise them on machines without a GPU.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import os
import tempfile
from pathlib import Path

import torch
from e3nn import o3

from atomistic.kernels.base import TensorProductConvolution, transpose_derivative
from atomistic.kernels.spec import ConvolutionSpec, sparse_terms

_SPECS: dict[str, ConvolutionSpec] = {}
BLOCK_EDGES = 32


def _register(spec: ConvolutionSpec) -> str:
    key = repr(spec)
    _SPECS[key] = spec
    return key


def _generate_source(spec: ConvolutionSpec) -> str:
    """Python source of the forward and backward Triton kernels specialised to ``spec``."""
    node, edge = o3.Irreps(spec.irreps_node), o3.Irreps(spec.irreps_edge)
    paths = sparse_terms(spec)
    node_dim, edge_dim, weight_dim, out_dim = node.dim, edge.dim, spec.weight_numel, spec.irreps_out.dim
    # node irreps that paths read: (node_start, node_dim, mul)
    sources = sorted({(start, dim, mul) for mul, start, dim, *_ in paths})
    header = [
        "import triton",
        "import triton.language as tl",
        "",
    ]

    def prologue(name: str, extra_args: str) -> list[str]:
        lines = [
            "@triton.jit",
            f"def {name}(h_ptr, y_ptr, w_ptr, centre_ptr, neighbour_ptr, {extra_args}n_edges, BLOCK_E: tl.constexpr, BLOCK_C: tl.constexpr):",
            "    e = tl.program_id(0) * BLOCK_E + tl.arange(0, BLOCK_E)",
            "    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)",
            "    edge_mask = e < n_edges",
            "    ctr = tl.load(centre_ptr + e, mask=edge_mask, other=0)",
            "    nbr = tl.load(neighbour_ptr + e, mask=edge_mask, other=0)",
        ]
        for j in range(edge_dim):
            lines.append(f"    y{j} = tl.load(y_ptr + e * {edge_dim} + {j}, mask=edge_mask, other=0.0)[:, None]")
        for start, dim, mul in sources:
            lines.append(f"    mask_{start} = edge_mask[:, None] & (c < {mul})[None, :]")
            for a in range(dim):
                lines.append(
                    f"    h{start + a} = tl.load(h_ptr + nbr[:, None] * {node_dim} + ({start + a} + c * {dim})[None, :], mask=mask_{start}, other=0.0)"
                )
        return lines

    forward = prologue("fused_forward", "out_ptr, ")
    for _, start, _, w_off, o_start, o_dim, terms in paths:
        forward.append(f"    w = tl.load(w_ptr + e[:, None] * {weight_dim} + ({w_off} + c)[None, :], mask=mask_{start}, other=0.0)")
        for k, term in enumerate(terms):
            if not term:
                continue
            expr = " + ".join(f"{coef!r} * h{start + a} * y{j}" for a, j, coef in term)
            forward.append(
                f"    tl.atomic_add(out_ptr + ctr[:, None] * {out_dim} + ({o_start + k} + c * {o_dim})[None, :], w * ({expr}), mask=mask_{start})"
            )

    backward = prologue(
        "fused_backward", "grad_ptr, grad_h_ptr, grad_y_ptr, grad_w_ptr, NEED_H: tl.constexpr, NEED_Y: tl.constexpr, NEED_W: tl.constexpr, "
    )
    grad_h = {start + a: [] for start, dim, _ in sources for a in range(dim)}
    grad_y = {j: [] for j in range(edge_dim)}
    for p, (_, start, _, w_off, o_start, o_dim, terms) in enumerate(paths):
        backward.append(f"    w{p} = tl.load(w_ptr + e[:, None] * {weight_dim} + ({w_off} + c)[None, :], mask=mask_{start}, other=0.0)")
        gw_terms = []
        for k, term in enumerate(terms):
            if not term:
                continue
            backward.append(
                f"    g{p}_{k} = tl.load(grad_ptr + ctr[:, None] * {out_dim} + ({o_start + k} + c * {o_dim})[None, :], mask=mask_{start}, other=0.0)"
            )
            backward.append(f"    wg{p}_{k} = w{p} * g{p}_{k}")
            gw_terms.append(f"g{p}_{k} * (" + " + ".join(f"{coef!r} * h{start + a} * y{j}" for a, j, coef in term) + ")")
            for a, j, coef in term:
                grad_h[start + a].append(f"{coef!r} * wg{p}_{k} * y{j}")
                grad_y[j].append(f"{coef!r} * wg{p}_{k} * h{start + a}")
        if gw_terms:
            backward.append("    if NEED_W:")
            backward.append(
                f"        tl.store(grad_w_ptr + e[:, None] * {weight_dim} + ({w_off} + c)[None, :], {' + '.join(gw_terms)}, mask=mask_{start})"
            )
    backward.append("    if NEED_H:")
    backward.append("        pass")
    for start, dim, _ in sources:
        for a in range(dim):
            column = start + a
            if grad_h[column]:
                backward.append(
                    f"        tl.atomic_add(grad_h_ptr + nbr[:, None] * {node_dim} + ({column} + c * {dim})[None, :], {' + '.join(grad_h[column])}, mask=mask_{start})"
                )
    backward.append("    if NEED_Y:")
    backward.append("        pass")
    for j in range(edge_dim):
        if grad_y[j]:
            backward.append(f"        tl.atomic_add(grad_y_ptr + e * {edge_dim} + {j}, tl.sum({' + '.join(grad_y[j])}, axis=1), mask=edge_mask)")
    return "\n".join(header + forward + [""] + backward) + "\n"


@functools.cache
def _kernels(key: str):
    """Generate, write and import the kernels of one spec (cached per process)."""
    source = _generate_source(_SPECS[key])
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    directory = Path(os.environ.get("ATOMISTIC_TRITON_CACHE", Path(tempfile.gettempdir()) / "atomistic-triton"))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"conv_{digest}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        tmp.replace(path)
    module_spec = importlib.util.spec_from_file_location(f"atomistic_triton_conv_{digest}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.fused_forward, module.fused_backward


def _grid(spec: ConvolutionSpec, n_edges: int):
    max_mul = max(mul for mul, _ in o3.Irreps(spec.irreps_node))
    block_c = min(32, 1 << max(0, math.ceil(math.log2(max_mul))))
    return (triton_cdiv(n_edges, BLOCK_EDGES), triton_cdiv(max_mul, block_c)), block_c


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


@torch.library.custom_op("atomistic::fused_convolution", mutates_args=())
def fused_convolution(
    node_features: torch.Tensor,
    edge_attrs: torch.Tensor,
    edge_weights: torch.Tensor,
    centre: torch.Tensor,
    neighbour: torch.Tensor,
    spec_key: str,
) -> torch.Tensor:
    """``[n_nodes, irreps_out.dim]``: the convolution of the registered spec ``spec_key``."""
    spec = _SPECS[spec_key]
    out = node_features.new_zeros(node_features.shape[0], spec.irreps_out.dim)
    n_edges = edge_attrs.shape[0]
    if n_edges == 0:
        return out
    forward, _ = _kernels(spec_key)
    grid, block_c = _grid(spec, n_edges)
    forward[grid](
        node_features.contiguous(), edge_attrs.contiguous(), edge_weights.contiguous(), centre.contiguous(), neighbour.contiguous(),
        out, n_edges, BLOCK_E=BLOCK_EDGES, BLOCK_C=block_c,
    )
    return out


@fused_convolution.register_fake
def _(node_features, edge_attrs, edge_weights, centre, neighbour, spec_key):
    return node_features.new_empty(node_features.shape[0], _SPECS[spec_key].irreps_out.dim)


@torch.library.custom_op("atomistic::fused_convolution_backward", mutates_args=())
def fused_convolution_backward(
    grad: torch.Tensor,
    node_features: torch.Tensor,
    edge_attrs: torch.Tensor,
    edge_weights: torch.Tensor,
    centre: torch.Tensor,
    neighbour: torch.Tensor,
    spec_key: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients with respect to node features, edge attributes and edge weights."""
    spec = _SPECS[spec_key]
    grad_h = torch.zeros_like(node_features)
    grad_y = torch.zeros_like(edge_attrs)
    grad_w = torch.zeros_like(edge_weights)
    n_edges = edge_attrs.shape[0]
    if n_edges == 0:
        return grad_h, grad_y, grad_w
    _, backward = _kernels(spec_key)
    grid, block_c = _grid(spec, n_edges)
    backward[grid](
        node_features.contiguous(), edge_attrs.contiguous(), edge_weights.contiguous(), centre.contiguous(), neighbour.contiguous(),
        grad.contiguous(), grad_h, grad_y, grad_w, True, True, True, n_edges, BLOCK_E=BLOCK_EDGES, BLOCK_C=block_c,
    )
    return grad_h, grad_y, grad_w


@fused_convolution_backward.register_fake
def _(grad, node_features, edge_attrs, edge_weights, centre, neighbour, spec_key):
    return torch.empty_like(node_features), torch.empty_like(edge_attrs), torch.empty_like(edge_weights)


def _setup_context(ctx, inputs, output):
    node_features, edge_attrs, edge_weights, centre, neighbour, spec_key = inputs
    ctx.save_for_backward(node_features, edge_attrs, edge_weights, centre, neighbour)
    ctx.spec_key = spec_key


def _backward(ctx, grad):
    node_features, edge_attrs, edge_weights, centre, neighbour = ctx.saved_tensors
    grad_h, grad_y, grad_w = fused_convolution_backward(grad, node_features, edge_attrs, edge_weights, centre, neighbour, ctx.spec_key)
    return grad_h, grad_y, grad_w, None, None, None


def _setup_backward_context(ctx, inputs, output):
    grad, node_features, edge_attrs, edge_weights, centre, neighbour, spec_key = inputs
    ctx.save_for_backward(grad, node_features, edge_attrs, edge_weights, centre, neighbour)
    ctx.spec_key = spec_key


def _backward_of_backward(ctx, a_h, a_y, a_w):
    """The double backward through the fused kernels themselves (:func:`transpose_derivative`),
    which are differentiable in turn; the backward kernel computes all three products."""
    g, h, y, w, centre, neighbour = ctx.saved_tensors
    key = ctx.spec_key

    def convolve(h, y, w):
        return fused_convolution(h, y, w, centre, neighbour, key)

    def transpose(g, h, y, w, need):
        return fused_convolution_backward(g, h, y, w, centre, neighbour, key)

    return (*transpose_derivative(convolve, transpose, g, h, y, w, a_h, a_y, a_w), None, None, None)


fused_convolution.register_autograd(_backward, setup_context=_setup_context)
fused_convolution_backward.register_autograd(_backward_of_backward, setup_context=_setup_backward_context)


class TritonConvolution(TensorProductConvolution):
    """The fused Triton convolution (see the module docstring)."""

    backend_name = "triton"

    def __init__(self, spec: ConvolutionSpec):
        super().__init__(spec)
        spec.require_edge_multiplicity_one("the triton convolution")
        self.spec_key = _register(spec)

    def forward(self, node_features, edge_attrs, edge_weights, centre, neighbour):
        return fused_convolution(node_features, edge_attrs, edge_weights, centre, neighbour, self.spec_key)
