"""Reference backend: dense Clebsch–Gordan contractions in plain PyTorch.

Every path of an operation is folded into one precomputed coupling tensor (see
:mod:`atomistic.kernels.spec`), so a convolution is one matrix product per edge block and a
symmetric contraction is a short chain of batched matrix products — no Python loop over
irreps or paths in ``forward``.  Runs on any device and dtype and is differentiable to any
order through autograd (forces, stress and force-loss training).  It is tested against the
e3nn backend, path by path.
"""

from __future__ import annotations

import torch
from e3nn import o3

from atomistic.kernels.base import SymmetricContraction, TensorProductConvolution
from atomistic.kernels.spec import (
    ConvolutionSpec,
    SymmetricContractionSpec,
    monomials,
    output_index,
    packed_coupling,
)


class DenseConvolution(TensorProductConvolution):
    """Per channel group and per block of paths with output dimension ``d``:

        messages[e, c, p, :] = w[e, c, p] · (h[j_e, c, :] @ (Y_e · coupling))[p, :]

    (one batched matrix product and one broadcast product), then ``index_add`` into the
    centres; the blocks are permuted into ``irreps_out`` once per node.  Intermediates:
    ``[n_edges, mul, P_d, d]`` per block (the messages are materialised; the Triton backend
    avoids that).
    """

    backend_name = "reference"

    def __init__(self, spec: ConvolutionSpec):
        super().__init__(spec)
        dtype = torch.get_default_dtype()
        self.layout = []  # per group: (mul, dim_in, n_paths, [(d, first, count), ...])
        for g, group in enumerate(spec.channel_groups):
            coupling = group.coupling(dtype)  # [D_edge, D_in, D_out], paths ordered by d
            start = 0
            for b, (d, _, count) in enumerate(group.blocks):
                block = coupling[:, :, start : start + count * d]
                self.register_buffer(f"coupling_{g}_{b}", block.reshape(block.shape[0], -1).contiguous(), persistent=False)
                start += count * d
            self.register_buffer(f"node_index_{g}", group.node_index(), persistent=False)
            self.register_buffer(f"weight_index_{g}", group.weight_index(), persistent=False)
            self.layout.append((group.mul, group.dim_in, len(group.paths), group.blocks))
        self.register_buffer("output_index", output_index(spec), persistent=False)

    def forward(self, node_features, edge_attrs, edge_weights, centre, neighbour):
        n_nodes, n_edges = node_features.shape[0], edge_attrs.shape[0]
        outputs = []
        for g, (mul, dim_in, n_paths, blocks) in enumerate(self.layout):
            h = node_features.index_select(1, getattr(self, f"node_index_{g}")).view(n_nodes, mul, dim_in)
            h = h.index_select(0, neighbour)  # [n_edges, mul, D_in]
            weights = edge_weights.index_select(1, getattr(self, f"weight_index_{g}")).view(n_edges, mul, n_paths)
            for b, (d, first, count) in enumerate(blocks):
                per_edge = (edge_attrs @ getattr(self, f"coupling_{g}_{b}")).view(n_edges, dim_in, count, d)
                outputs.append(BlockConvolution.apply(h, per_edge, weights[:, :, first : first + count], centre, n_nodes))
        out = outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=1)
        return out.index_select(1, self.output_index)


class BlockConvolution(torch.autograd.Function):
    """``out[i, c, p, m] = Σ_{e: centre_e = i} w[e, c, p] Σ_a h[e, c, a] · per_edge[e, a, p, m]``.

    Forward: ``h [n_edges, C, D_in]`` (gathered sender features), ``per_edge [n_edges, D_in,
    P, d]``, ``w [n_edges, C, P]``, ``centre [n_edges]`` → ``[n_nodes, C * P * d]``.

    The messages are formed, weighted in place and summed without being saved; the backward
    pass contracts the incoming node gradient with the per-edge couplings directly.  The
    backward is written in differentiable torch operations, so second derivatives (force
    loss) flow through it.
    """

    @staticmethod
    def forward(ctx, h, per_edge, weights, centre, n_nodes: int):
        n_edges, channels, dim_in = h.shape
        n_paths, dim = per_edge.shape[2], per_edge.shape[3]
        messages = torch.bmm(h, per_edge.reshape(n_edges, dim_in, n_paths * dim)).view(n_edges, channels, n_paths, dim)
        messages.mul_(weights.unsqueeze(-1))
        ctx.save_for_backward(h, per_edge, weights, centre)
        return messages.new_zeros(n_nodes, channels * n_paths * dim).index_add_(0, centre, messages.view(n_edges, channels * n_paths * dim))

    @staticmethod
    def backward(ctx, grad_out):
        h, per_edge, weights, centre = ctx.saved_tensors
        n_edges, channels, dim_in = h.shape
        n_paths, dim = per_edge.shape[2], per_edge.shape[3]
        per_edge = per_edge.reshape(n_edges, dim_in, n_paths * dim)
        grad = grad_out.index_select(0, centre).view(n_edges, channels, n_paths, dim)
        grad_h = grad_per_edge = grad_weights = None
        if ctx.needs_input_grad[2]:
            messages = torch.bmm(h, per_edge).view(n_edges, channels, n_paths, dim)
            grad_weights = (grad * messages).sum(-1)
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            weighted = (grad * weights.unsqueeze(-1)).view(n_edges, channels, n_paths * dim)
            if ctx.needs_input_grad[0]:
                grad_h = torch.bmm(weighted, per_edge.transpose(1, 2))
            if ctx.needs_input_grad[1]:
                grad_per_edge = torch.bmm(h.transpose(1, 2), weighted).view(n_edges, dim_in, n_paths, dim)
        return grad_h, grad_per_edge, grad_weights, None, None


class DenseSymmetricContraction(SymmetricContraction):
    """The product basis as a Horner scheme over the distinct pair monomials of each channel:

        q_π = A_i A_j                                  (π = (i, j), i <= j)
        B[c, K] = Σ_k A_k Σ_π V[z, c, K, k, π] q_π  +  Σ_π W2[z, c, K, π] q_π  +  Σ_k W1[z, c, K, k] A_k

    ``V``, ``W2`` and ``W1`` are the species weights folded into the couplings, which are first
    summed over index permutations (every factor is the same ``A``: see
    :func:`~atomistic.kernels.spec.packed_coupling`); ``V`` holds the third-order monomial
    ``(i, j, k)`` (``i <= j <= k``) at ``[k, (i, j)]``.  For ``D = 16`` (``l <= 3``) a channel
    has 136 pair monomials, so no ``D³`` tensor is ever formed.  The monomials do not depend on
    the species; the species only pick the folded weights (one batched matrix product per
    species present).  Intermediates: ``[C, 136, n_atoms]`` and ``[C, D_out (D + 1), n_atoms]``.
    """

    backend_name = "reference"

    def __init__(self, spec: SymmetricContractionSpec):
        super().__init__(spec)
        dtype = torch.get_default_dtype()
        self.channels = spec.channels
        self.dim = dim = sum(ir.dim for _, ir in self.irreps_in)
        self.dim_out = sum(ir.dim for _, ir in self.irreps_out)
        pairs = monomials(dim, 2)
        pair_position = {pair: t for t, pair in enumerate(pairs)}
        self.register_buffer("coupling_1", packed_coupling(spec, 1).transpose(1, 2).reshape(spec.num_paths(1), -1).to(dtype), persistent=False)
        if spec.correlation >= 2:  # [P2, D_out * n_pairs]
            c2 = packed_coupling(spec, 2).transpose(1, 2)
            self.register_buffer("coupling_2", c2.reshape(c2.shape[0], -1).to(dtype), persistent=False)
        if spec.correlation >= 3:  # [P3, D_out * D * n_pairs]: monomial (i, j, k) at [K, k, (i, j)]
            c3 = packed_coupling(spec, 3)
            by_last = torch.zeros(c3.shape[0], self.dim_out, dim, len(pairs), dtype=torch.float64)
            for t, (i, j, k) in enumerate(monomials(dim, 3)):
                by_last[:, :, k, pair_position[(i, j)]] = c3[:, t, :]
            self.register_buffer("coupling_3", by_last.reshape(c3.shape[0], -1).to(dtype), persistent=False)
        self.register_buffer("pair_first", torch.tensor([i for i, _ in pairs]), persistent=False)
        self.register_buffer("pair_second", torch.tensor([j for _, j in pairs]), persistent=False)
        self.register_buffer("input_index", _channel_major_index(self.irreps_in), persistent=False)
        self.register_buffer("output_index", _channel_major_index(self.irreps_out).argsort(), persistent=False)

    def _fold(self, order: int, weights: torch.Tensor) -> torch.Tensor:
        """``weights [S, P, C]`` → ``[S, C, rows, columns]`` (the coupling of ``order`` per species)."""
        folded = weights.transpose(1, 2) @ getattr(self, f"coupling_{order}")  # [S, C, X]
        columns = self.dim if order == 1 else self.pair_first.shape[0]
        return folded.view(weights.shape[0], self.channels, -1, columns)

    def _contract(self, a: torch.Tensor, pairs: torch.Tensor | None, folded: list[torch.Tensor]) -> torch.Tensor:
        """``a [C, D, n]``, ``pairs [C, n_pairs, n]``, folded weights of one species → ``[C, D_out, n]``."""
        out = folded[0] @ a
        if len(folded) >= 2:
            pair_weights = folded[1] if len(folded) == 2 else torch.cat([folded[2], folded[1]], dim=1)
            r = pair_weights @ pairs  # [C, D_out (D + 1) or D_out, n]
            if len(folded) == 3:
                cubic = r[:, : self.dim_out * self.dim].view(self.channels, self.dim_out, self.dim, a.shape[2])
                out = out + (cubic * a.unsqueeze(1)).sum(2) + r[:, self.dim_out * self.dim :]
            else:
                out = out + r
        return out

    def forward(self, atomic_basis, species, weights):
        n_atoms = atomic_basis.shape[0]
        basis = atomic_basis.index_select(1, self.input_index).view(n_atoms, self.channels, self.dim)
        a = basis.permute(1, 2, 0).contiguous()  # [C, D, n]
        pairs = a.index_select(1, self.pair_first) * a.index_select(1, self.pair_second) if self.spec.correlation >= 2 else None
        present = torch.unique(species).tolist()
        if len(present) == 1:
            s = present[0]
            out = self._contract(a, pairs, [self._fold(order, w[s : s + 1])[0] for order, w in enumerate(weights, start=1)])
        else:
            folded = [self._fold(order, w) for order, w in enumerate(weights, start=1)]
            out = a.new_zeros(self.channels, self.dim_out, n_atoms)
            for s in present:
                atoms = (species == s).nonzero().squeeze(1)
                a_s = a.index_select(2, atoms)
                pairs_s = pairs.index_select(2, atoms) if pairs is not None else None
                out = out.index_copy(2, atoms, self._contract(a_s, pairs_s, [f[s] for f in folded]))
        return out.permute(2, 0, 1).reshape(n_atoms, self.channels * self.dim_out).index_select(1, self.output_index)


def _channel_major_index(irreps: o3.Irreps) -> torch.Tensor:
    """``[irreps.dim]``: the ``mul_ir`` columns in channel-major order ``[mul, Σ (2l+1)]``
    (every irrep with the same multiplicity)."""
    slices = irreps.slices()
    mul = irreps[0].mul
    columns = []
    for channel in range(mul):
        for (_, ir), sl in zip(irreps, slices, strict=True):
            columns.extend(range(sl.start + channel * ir.dim, sl.start + (channel + 1) * ir.dim))
    return torch.tensor(columns, dtype=torch.long)
