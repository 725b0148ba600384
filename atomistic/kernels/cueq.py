"""cuEquivariance backend (``cuequivariance-torch``).

The convolution is one cuEquivariance segmented polynomial that gathers the senders,
couples them with the edge spherical harmonics under the per-edge weights and scatters into
the receivers, built from *our* paths and coefficients (so our weight layout is its weight
layout).  The symmetric contraction is cuEquivariance's own MACE descriptor (a reduced
symmetric basis); our per-path weights are mapped onto its basis by a fixed linear map
fitted exactly once at construction (:func:`_fit_weight_map`), so the same checkpoint runs
unchanged.  Node features are transposed between e3nn's ``mul_ir`` layout and cuEquivariance's
``ir_mul`` layout at the boundary.

On CUDA the polynomials run on cuEquivariance's fused kernels (``uniform_1d``; the
``cuequivariance-ops-torch-cu12``/``-cu13`` wheel must match the CUDA runtime); elsewhere on
its portable PyTorch path (``naive``), which is what the CPU parity tests exercise.
"""

from __future__ import annotations

import functools

import cuequivariance as cue
import cuequivariance_torch as cuet
import torch
from e3nn import o3

from atomistic.kernels.base import SymmetricContraction, TensorProductConvolution
from atomistic.kernels.spec import ConvolutionSpec, SymmetricContractionSpec


def _cue_irreps(irreps) -> cue.Irreps:
    return cue.Irreps("O3", str(o3.Irreps(irreps)))


class _MethodPerDevice(torch.nn.Module):
    """One segmented polynomial, run with ``naive`` on CPU and ``uniform_1d`` (fused CUDA
    kernels) on GPU; the CUDA module is built on the first CUDA call."""

    def __init__(self, polynomial: cue.SegmentedPolynomial, cuda_polynomial: cue.SegmentedPolynomial | None = None):
        super().__init__()
        self.portable = cuet.SegmentedPolynomial(polynomial, method="naive")
        self._cuda_polynomial = cuda_polynomial if cuda_polynomial is not None else polynomial
        self._cuda: dict[str, torch.nn.Module] = {}

    def forward(self, inputs, **kwargs):
        if inputs[0].is_cuda:
            device = str(inputs[0].device)
            if device not in self._cuda:
                self._cuda[device] = cuet.SegmentedPolynomial(self._cuda_polynomial, method="uniform_1d").to(device)
            return self._cuda[device](inputs, **kwargs)
        return self.portable(inputs, **kwargs)


class CueqConvolution(TensorProductConvolution):
    backend_name = "cueq"

    def __init__(self, spec: ConvolutionSpec):
        super().__init__(spec)
        node, edge = o3.Irreps(spec.irreps_node), o3.Irreps(spec.irreps_edge)
        spec.require_edge_multiplicity_one("the cueq convolution")
        d = cue.SegmentedTensorProduct.from_subscripts("uv,iu,jv,kuv+ijk")
        for mul, ir in node:
            d.add_segment(1, (ir.dim, mul))
        for _, ir in edge:
            d.add_segment(2, (ir.dim, 1))
        for p, (i_node, i_edge, i_out) in enumerate(spec.paths):
            l1, l2, l3 = node[i_node].ir.l, edge[i_edge].ir.l, spec.irreps_out[i_out].ir.l
            coefficients = o3.wigner_3j(l1, l2, l3, dtype=torch.float64) * spec.path_weight(p)
            d.add_path(None, i_node, i_edge, None, c=coefficients.numpy(), dims={"u": node[i_node].mul, "v": 1})
        # output segments follow the path order; our irreps_out index them by i_out
        out_order = [i_out for _, _, i_out in spec.paths]
        d = d.permute_segments(3, sorted(range(len(out_order)), key=lambda k: out_order[k]))
        polynomial = cue.SegmentedPolynomial.eval_last_operand(d)
        cuda_polynomial = cue.SegmentedPolynomial.eval_last_operand(d.flatten_coefficient_modes())
        self.polynomial = _MethodPerDevice(polynomial, cuda_polynomial)
        self.transpose_in = cuet.TransposeIrrepsLayout(_cue_irreps(node), source=cue.mul_ir, target=cue.ir_mul)
        self.transpose_out = cuet.TransposeIrrepsLayout(_cue_irreps(spec.irreps_out), source=cue.ir_mul, target=cue.mul_ir)

    def forward(self, node_features, edge_attrs, edge_weights, centre, neighbour):
        [out] = self.polynomial(
            [edge_weights, self.transpose_in(node_features), edge_attrs],
            input_indices={1: neighbour},
            output_indices={0: centre},
            output_shapes={0: node_features.new_empty(node_features.shape[0], 1)},
        )
        return self.transpose_out(out)


class CueqSymmetricContraction(SymmetricContraction):
    """cuEquivariance's MACE symmetric contraction under our weights.

    On CUDA the fused ``uniform_1d`` kernel runs the ``C``-channel descriptor (built on the
    first CUDA call).  Elsewhere the single-channel descriptor runs on the portable path with
    the channels folded into the batch (each (atom, channel) pair is one row, its weights
    indexed by ``species * C + channel``), which reuses the polynomial built for the weight fit.
    """

    backend_name = "cueq"

    def __init__(self, spec: SymmetricContractionSpec):
        super().__init__(spec)
        from atomistic.kernels.reference import _channel_major_index

        self.channels = spec.channels
        single = _single_channel(spec)
        weight_map, polynomial, transpose_in, transpose_out = _single_channel_contraction(single)
        self.register_buffer("weight_map", weight_map.to(torch.get_default_dtype()), persistent=False)
        self.portable = polynomial
        self.single_transpose_in, self.single_transpose_out = transpose_in, transpose_out
        self.register_buffer("input_index", _channel_major_index(self.irreps_in), persistent=False)
        self.register_buffer("output_index", _channel_major_index(self.irreps_out).argsort(), persistent=False)
        self._cuda: dict[str, tuple] = {}

    def _theirs(self, weights: list[torch.Tensor]) -> torch.Tensor:
        """Our per-path weights ``[S, P_ν, C]`` → cuEquivariance's ``[S, Q, C]``."""
        return torch.einsum("spc,pq->sqc", torch.cat(weights, dim=1), self.weight_map)

    def forward(self, atomic_basis, species, weights):
        theirs = self._theirs(weights)
        if atomic_basis.is_cuda:
            return self._forward_cuda(atomic_basis, species, theirs)
        n_atoms, channels = atomic_basis.shape[0], self.channels
        rows = atomic_basis.index_select(1, self.input_index).view(n_atoms * channels, -1)  # one channel per row
        row_weights = theirs.transpose(1, 2).reshape(-1, theirs.shape[1])  # [S * C, Q]
        row_index = (species.unsqueeze(1) * channels + torch.arange(channels, device=species.device)).reshape(-1)
        [out] = self.portable([row_weights, self.single_transpose_in(rows)], input_indices={0: row_index})
        out = self.single_transpose_out(out).reshape(n_atoms, -1)
        return out.index_select(1, self.output_index)

    def _forward_cuda(self, atomic_basis, species, theirs):
        device = str(atomic_basis.device)
        if device not in self._cuda:
            contraction = cuet.SymmetricContraction(
                _cue_irreps(self.spec.irreps_in), _cue_irreps(self.spec.irreps_out), self.spec.correlation,
                num_elements=1, layout=cue.mul_ir, method="uniform_1d", dtype=atomic_basis.dtype, device=device,
            )
            self._cuda[device] = (contraction.f, contraction.transpose_in, contraction.transpose_out)
        polynomial, transpose_in, transpose_out = self._cuda[device]
        [out] = polynomial([theirs.flatten(1), transpose_in(atomic_basis)], input_indices={0: species})
        return transpose_out(out)


def _single_channel(spec: SymmetricContractionSpec) -> SymmetricContractionSpec:
    one_in = o3.Irreps([(1, ir) for _, ir in o3.Irreps(spec.irreps_in)])
    one_out = o3.Irreps([(1, ir) for _, ir in o3.Irreps(spec.irreps_out)])
    return SymmetricContractionSpec(str(one_in), str(one_out), spec.correlation)


@functools.cache
def _single_channel_contraction(single: SymmetricContractionSpec):
    """The single-channel cuEquivariance contraction (portable polynomial and layout
    transposes) and the ``[P, Q]`` map with ``ours_p(A) = Σ_q M[p, q] · theirs_q(A)`` for every
    weighted path ``p`` and every element ``q`` of cuEquivariance's reduced symmetric basis.
    Both sides are polynomials of degree ≤ ``correlation`` in ``A``, so a least-squares fit on
    enough random inputs is exact; the residual is checked.  Building cuEquivariance's basis
    is slow for ``l = 3`` (tens of seconds), hence the cache."""
    from atomistic.kernels.reference import DenseSymmetricContraction

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        theirs_module = cuet.SymmetricContraction(
            _cue_irreps(single.irreps_in), _cue_irreps(single.irreps_out), single.correlation,
            num_elements=1, layout=cue.mul_ir, method="naive", dtype=torch.float64,
        )
        ours_module = DenseSymmetricContraction(single)
    finally:
        torch.set_default_dtype(previous)
    counts = [single.num_paths(order) for order in range(1, single.correlation + 1)]
    n_ours, n_theirs = sum(counts), theirs_module.weight_shape[0]
    dim_in, dim_out = o3.Irreps(single.irreps_in).dim, o3.Irreps(single.irreps_out).dim
    samples = 4 * max(n_ours, n_theirs)
    x = torch.randn(samples, dim_in, generator=torch.Generator().manual_seed(0), dtype=torch.float64)

    # each side: one weight set per basis element, every sample evaluated under each of them
    basis = torch.eye(n_ours, dtype=torch.float64).split(counts, dim=1)
    ours = ours_module(x.repeat(n_ours, 1), torch.arange(n_ours).repeat_interleave(samples), [b.unsqueeze(-1) for b in basis])
    ours = ours.view(n_ours, samples * dim_out).T  # [R * D_out, P]
    [theirs] = theirs_module.f(
        [torch.eye(n_theirs, dtype=torch.float64), theirs_module.transpose_in(x.repeat(n_theirs, 1))],
        input_indices={0: torch.arange(n_theirs).repeat_interleave(samples)},
    )
    theirs = theirs_module.transpose_out(theirs).view(n_theirs, samples * dim_out).T  # [R * D_out, Q]

    solution = torch.linalg.lstsq(theirs, ours).solution  # [Q, P]
    residual = (theirs @ solution - ours).abs().max().item()
    if residual > 1e-8 * max(1.0, ours.abs().max().item()):
        raise RuntimeError(f"cuEquivariance's symmetric basis does not reproduce the product basis (residual {residual:.2e})")
    return solution.T.contiguous(), theirs_module.f, theirs_module.transpose_in, theirs_module.transpose_out


class CueqLinear(o3.Linear):
    """An e3nn ``o3.Linear`` (same parameters, same checkpoint keys) whose product runs on
    cuEquivariance's linear descriptor.  Both order the weights as one ``[mul_in, mul_out]``
    block per (input irrep, output irrep) pair and normalise each output by the square root of
    its fan-in, so the e3nn weights are cuEquivariance's weights; construction checks that on a
    random probe and refuses to build if a cuEquivariance version ever disagrees."""

    def __init__(self, irreps_in, irreps_out):
        super().__init__(o3.Irreps(irreps_in), o3.Irreps(irreps_out))
        self.backend_kernel = cuet.Linear(
            _cue_irreps(irreps_in), _cue_irreps(irreps_out), layout=cue.mul_ir, shared_weights=True, internal_weights=False,
            method="naive", dtype=torch.float64,
        )
        _check_same_layout(self)
        self._cuda: dict[str, torch.nn.Module] = {}

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        weight = self.weight.unsqueeze(0)
        if features.is_cuda:
            device = str(features.device)
            if device not in self._cuda:
                self._cuda[device] = cuet.Linear(
                    _cue_irreps(self.irreps_in), _cue_irreps(self.irreps_out), layout=cue.mul_ir, shared_weights=True,
                    internal_weights=False, method="fused_tp", dtype=features.dtype, device=device,
                )
            out = self._cuda[device](features, weight=weight)
        else:
            out = self.backend_kernel(features, weight=weight.to(features.dtype))
        if self.bias.numel():  # e3nn's biases (scalar outputs): the response to a zero input
            out = out + super().forward(features.new_zeros(1, self.irreps_in.dim))
        return out


def _check_same_layout(linear: CueqLinear) -> None:
    generator = torch.Generator().manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        reference = o3.Linear(linear.irreps_in, linear.irreps_out, biases=False)
    finally:
        torch.set_default_dtype(previous)
    weight = torch.randn(1, reference.weight_numel, generator=generator, dtype=torch.float64)
    x = torch.randn(3, linear.irreps_in.dim, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        reference.weight.copy_(weight[0])
        expected, actual = reference(x), linear.backend_kernel(x, weight=weight)
    if not torch.allclose(expected, actual, atol=1e-10, rtol=1e-10):
        raise RuntimeError("this cuequivariance version lays out or normalises linear weights differently from e3nn")
