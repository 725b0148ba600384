"""CPU backend: the symmetric contraction (product basis) as a sparse C++/OpenMP kernel
(``csrc/symmetric_contraction.cpp``, built with the fused convolution).

Per channel, the product basis is a polynomial of degree 1 to 3 in the atomic basis. Its
couplings are mostly zero (Clebsch–Gordan selection rules): with ``l <= 3`` inputs and ``0e +
1o`` outputs, 410 of the 3 872 (output component, monomial) pairs are non-zero, so the kernel
walks a list of those terms instead of contracting dense coupling tensors as ``reference``
does.  The species weights are folded into the terms in torch (``F = Wᵀ · coupling``: one small
matrix product, differentiable there); the kernel evaluates

    B[n, K, c] = Σ_{t: K_t = K} F[z_n, t, c] · A[n, x0_t, c] · A[n, x1_t, c] · A[n, x2_t, c]

and its vector–Jacobian product (forces) in C++, and the derivative of that product (training
with a force loss) too.  Third derivatives are not supported.
"""

from __future__ import annotations

import torch
from e3nn import o3

from atomistic.kernels.base import SymmetricContraction
from atomistic.kernels.cpu_fused import extension, ir_mul_index
from atomistic.kernels.spec import SymmetricContractionSpec, monomials, packed_coupling

COUPLING_TOLERANCE = 1e-12


def sparse_contraction_terms(spec: SymmetricContractionSpec) -> tuple[torch.Tensor, torch.Tensor]:
    """The structurally non-zero terms of the contraction.

    Returns ``terms [T, 4]`` int64, each ``(K, x0, x1, x2)``: output component ``K`` (within
    ``Σ (2l+1)`` of the output irreps) and the monomial's factors in the atomic basis
    (``Σ (2l+1) = D`` components), missing factors of lower degrees set to ``D`` (a constant
    one); and ``coupling [num_paths(1) + … + num_paths(correlation), T]`` float64, the packed
    coupling of every weighted path (orders concatenated) on those terms."""
    dim = sum(ir.dim for _, ir in o3.Irreps(spec.irreps_in))
    packed = [packed_coupling(spec, order) for order in range(1, spec.correlation + 1)]  # [P, monomials, D_out]
    terms, columns = [], []
    for order, coupling in enumerate(packed, start=1):
        present = (coupling.abs() > COUPLING_TOLERANCE).any(0)  # [monomials, D_out]
        for t, monomial in enumerate(monomials(dim, order)):
            for k in present[t].nonzero().flatten().tolist():
                terms.append((k, *monomial, *([dim] * (3 - order))))
                columns.append((order, t, k))
    offsets = [0]
    for coupling in packed:
        offsets.append(offsets[-1] + coupling.shape[0])
    weights = torch.zeros(offsets[-1], len(terms), dtype=torch.float64)
    for column, (order, t, k) in enumerate(columns):
        weights[offsets[order - 1] : offsets[order], column] = packed[order - 1][:, t, k]
    return torch.tensor(terms, dtype=torch.long).reshape(-1, 4), weights


class CpuSymmetricContraction(SymmetricContraction):
    """The symmetric contraction of ``spec`` on the sparse C++ kernel (same function, weight
    layout and normalisation as :class:`~atomistic.kernels.reference.DenseSymmetricContraction`).

    Intermediates: the folded weights ``[num_species, T, C]``; the atomic basis is read as
    ``[n_atoms, D, C]`` and no monomial tensor is formed.
    """

    backend_name = "cpu"

    def __init__(self, spec: SymmetricContractionSpec):
        super().__init__(spec)
        extension()  # compile now, not inside the first forward
        terms, coupling = sparse_contraction_terms(spec)
        self.terms = terms
        self.register_buffer("coupling", coupling.to(torch.get_default_dtype()), persistent=False)  # [P_total, T]
        self.channels = spec.channels
        self.dim = sum(ir.dim for _, ir in self.irreps_in)
        self.dim_out = sum(ir.dim for _, ir in self.irreps_out)
        self.input_index = ir_mul_index(self.irreps_in)  # mul_ir → [D, C]
        self.output_index = ir_mul_index(self.irreps_out).argsort()  # [D_out, C] → mul_ir

    def forward(self, atomic_basis, species, weights):
        if atomic_basis.device.type != "cpu":
            raise ValueError("the cpu kernel backend runs on CPU tensors; use backend='auto' on GPU")
        n_atoms = atomic_basis.shape[0]
        a = atomic_basis.index_select(1, self.input_index).view(n_atoms, self.dim, self.channels)
        folded = (torch.cat(weights, dim=1).transpose(1, 2) @ self.coupling.to(atomic_basis.dtype)).transpose(1, 2)
        out = _SymmetricContraction.apply(a.contiguous(), folded.contiguous(), species.contiguous(), self)
        return out.reshape(n_atoms, self.dim_out * self.channels).index_select(1, self.output_index)


class _SymmetricContraction(torch.autograd.Function):
    """``(a [n, D, C], folded [S, T, C], species [n])`` → ``[n, D_out, C]``."""

    @staticmethod
    def forward(ctx, a, folded, species, module):
        ctx.save_for_backward(a, folded, species)
        ctx.module = module
        return extension().symmetric_contraction_forward(a, folded, species, module.terms, module.dim_out)

    @staticmethod
    def backward(ctx, grad):
        a, folded, species = ctx.saved_tensors
        need_a, need_f = ctx.needs_input_grad[:2]
        if torch.is_grad_enabled():  # the backward will be differentiated (force loss)
            grad_a, grad_f = _SymmetricContractionTranspose.apply(grad, a, folded, species, ctx.module)
        else:
            grad_a, grad_f = extension().symmetric_contraction_backward(
                grad.contiguous(), a, folded, species, ctx.module.terms, need_a, need_f
            )
        return (grad_a if need_a else None, grad_f if need_f else None, None, None)


class _SymmetricContractionTranspose(torch.autograd.Function):
    """The vector–Jacobian product ``(grad [n, D_out, C]; a, folded) → (grad_a, grad_folded)``
    as a differentiable operation; its derivative is one more pass of the same kernel."""

    @staticmethod
    def forward(ctx, grad, a, folded, species, module):
        grad = grad.contiguous()
        ctx.save_for_backward(grad, a, folded, species)
        ctx.module = module
        ctx.set_materialize_grads(False)  # an unused output arrives as None: its terms are skipped
        return tuple(extension().symmetric_contraction_backward(grad, a, folded, species, module.terms, True, True))

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, upstream_a, upstream_f):
        grad, a, folded, species = ctx.saved_tensors
        empty = a.new_empty(0)
        grad_g, grad_a, grad_f = extension().symmetric_contraction_double_backward(
            grad, a, folded, species, ctx.module.terms,
            empty if upstream_a is None else upstream_a.contiguous(),
            empty if upstream_f is None else upstream_f.contiguous(),
        )
        reached = upstream_a is not None or upstream_f is not None
        return (
            grad_g if reached else None,
            grad_a if reached else None,
            grad_f if upstream_a is not None else None,
            None,
            None,
        )
