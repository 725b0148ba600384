"""The descriptions of the equivariant operations that every kernel backend implements.

A :class:`ConvolutionSpec` fixes the irreps, the list of channel-wise ("uvu") paths and the
layout of the per-edge weights; a :class:`SymmetricContractionSpec` fixes the coupling paths
of the product basis and the layout of its species-wise weights.  Backends differ only in how
they compute; they hold no parameters of their own, so saved weights are identical whichever
backend runs them.  The dense coupling tensors that the fast backends contract are derived
here, once, from e3nn's Wigner 3j symbols with e3nn's normalisation (``irrep_normalization=
"component"``, ``path_normalization="element"``), so every backend computes the same function.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from functools import cached_property

import torch
from e3nn import o3


@dataclasses.dataclass(frozen=True)
class ConvolutionSpec:
    """Channel-wise tensor-product convolution ``m_i = Σ_j W(r_ij) · (h_j ⊗ Y(r̂_ij))``.

    Attributes:
        irreps_node: irreps of the neighbour features ``h_j``.
        irreps_edge: irreps of the edge attributes ``Y`` (spherical harmonics).
        lmax_out: keep only output irreps with ``l <= lmax_out``.
        parity_out: allowed output parities (``(1, -1)`` keeps both).
        sort_output: order the output irreps (and so the paths and the weight layout) by
            irrep, as NequIP/SevenNet do; otherwise outputs follow the path enumeration.
    """

    irreps_node: str
    irreps_edge: str
    lmax_out: int
    parity_out: tuple[int, ...] = (1, -1)
    sort_output: bool = False

    @cached_property
    def _enumerated(self) -> tuple[list[tuple[int, int]], o3.Irreps]:
        """Paths ``(i_node, i_edge)`` and their output irreps in enumeration order."""
        node, edge = o3.Irreps(self.irreps_node), o3.Irreps(self.irreps_edge)
        pairs, out = [], []
        for i_node, (mul, ir_node) in enumerate(node):
            for i_edge, (_, ir_edge) in enumerate(edge):
                for ir_out in ir_node * ir_edge:
                    if ir_out.l <= self.lmax_out and ir_out.p in self.parity_out:
                        pairs.append((i_node, i_edge))
                        out.append((mul, ir_out))
        return pairs, o3.Irreps(out)

    @cached_property
    def paths(self) -> tuple[tuple[int, int, int], ...]:
        """``(i_node, i_edge, i_out)`` for each "uvu" path, in weight-layout order;
        ``i_out`` indexes :attr:`irreps_out`."""
        pairs, irreps = self._enumerated
        if not self.sort_output:
            return tuple((i, j, k) for k, (i, j) in enumerate(pairs))
        permutation = irreps.sort().p  # old index -> sorted index
        return tuple(sorted(((i, j, permutation[k]) for k, (i, j) in enumerate(pairs)), key=lambda path: path[2]))

    @cached_property
    def irreps_out(self) -> o3.Irreps:
        """One entry per path (not simplified): ``mul_node x ir_out``."""
        _, irreps = self._enumerated
        return irreps.sort().irreps if self.sort_output else irreps

    @cached_property
    def instructions(self) -> list[tuple[int, int, int, str, bool]]:
        """e3nn ``TensorProduct`` instructions (the reference layout of the weights)."""
        return [(i_node, i_edge, i_out, "uvu", True) for i_node, i_edge, i_out in self.paths]

    @cached_property
    def weight_numel(self) -> int:
        """Per-edge weights: ``mul_node * mul_edge`` for each path, concatenated in path order."""
        node, edge = o3.Irreps(self.irreps_node), o3.Irreps(self.irreps_edge)
        return sum(node[i].mul * edge[j].mul for i, j, _ in self.paths)

    def path_weight(self, path_index: int) -> float:
        """e3nn's normalisation of one "uvu" path: ``sqrt(dim(ir_out) / fan_in)``, where the
        fan-in is the edge multiplicity summed over the paths into the same output."""
        i_node, i_edge, i_out = self.paths[path_index]
        edge = o3.Irreps(self.irreps_edge)
        fan_in = sum(edge[j].mul for _, j, k in self.paths if k == i_out)
        return math.sqrt(self.irreps_out[i_out].ir.dim / fan_in)

    def require_edge_multiplicity_one(self, who: str) -> None:
        """The dense and fused kernels treat each edge irrep as one set of components."""
        edge = o3.Irreps(self.irreps_edge)
        if any(mul != 1 for mul, _ in edge):
            raise ValueError(f"{who} needs edge irreps of multiplicity 1, got {edge}")

    @cached_property
    def channel_groups(self) -> tuple[ChannelGroup, ...]:
        """The paths grouped by the multiplicity of their node irrep (one group for MACE-style
        uniform channels).  Each group is computed with one dense coupling tensor."""
        self.require_edge_multiplicity_one("the dense convolution")
        node = o3.Irreps(self.irreps_node)
        groups = []
        for mul in sorted({mul for mul, _ in node}, reverse=True):
            node_irreps = [i for i, (m, _) in enumerate(node) if m == mul]
            paths = [p for p, (i, _, _) in enumerate(self.paths) if i in node_irreps]
            paths.sort(key=lambda p: self.irreps_out[self.paths[p][2]].ir.dim)  # blocks of equal 2l+1
            if paths:
                groups.append(ChannelGroup(self, mul, tuple(node_irreps), tuple(paths)))
        return tuple(groups)


@dataclasses.dataclass(frozen=True)
class ChannelGroup:
    """Node irreps of one multiplicity and the convolution paths that start from them.

    The group's node features are handled as ``[n, mul, D_in]`` (``D_in`` = the summed
    ``2l+1`` of its node irreps).  Its paths are ordered by output dimension ``d = 2l+1`` and
    their messages handled in blocks ``[n, mul, P_d, d]``, one per distinct ``d``, so each
    path's per-edge weight broadcasts over its ``d`` components.
    """

    spec: ConvolutionSpec
    mul: int
    node_irreps: tuple[int, ...]
    paths: tuple[int, ...]

    @cached_property
    def dim_in(self) -> int:
        node = o3.Irreps(self.spec.irreps_node)
        return sum(node[i].ir.dim for i in self.node_irreps)

    @cached_property
    def out_dims(self) -> tuple[int, ...]:
        return tuple(self.spec.irreps_out[self.spec.paths[p][2]].ir.dim for p in self.paths)

    @cached_property
    def dim_out(self) -> int:
        return sum(self.out_dims)

    def coupling(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """``[D_edge, D_in, D_out]``: normalised Wigner 3j blocks, so that the message of one
        channel is ``h[D_in] · (Y[D_edge] · coupling)``."""
        node, edge = o3.Irreps(self.spec.irreps_node), o3.Irreps(self.spec.irreps_edge)
        in_offset = {}
        offset = 0
        for i in self.node_irreps:
            in_offset[i] = offset
            offset += node[i].ir.dim
        edge_slices = edge.slices()
        tensor = torch.zeros(edge.dim, self.dim_in, self.dim_out, dtype=torch.float64)
        out_offset = 0
        for p in self.paths:
            i_node, i_edge, i_out = self.spec.paths[p]
            l1, l2, l3 = node[i_node].ir.l, edge[i_edge].ir.l, self.spec.irreps_out[i_out].ir.l
            w3j = o3.wigner_3j(l1, l2, l3, dtype=torch.float64) * self.spec.path_weight(p)  # [2l1+1, 2l2+1, 2l3+1]
            a = slice(in_offset[i_node], in_offset[i_node] + 2 * l1 + 1)
            c = slice(out_offset, out_offset + 2 * l3 + 1)
            tensor[edge_slices[i_edge], a, c] += w3j.transpose(0, 1)
            out_offset += 2 * l3 + 1
        return tensor.to(dtype)

    def node_index(self) -> torch.Tensor:
        """``[mul * D_in]``: columns of the node features (``mul_ir`` layout) that form the
        group's ``[mul, D_in]`` block, channel-major."""
        node = o3.Irreps(self.spec.irreps_node)
        slices = node.slices()
        columns = []
        for channel in range(self.mul):
            for i in self.node_irreps:
                dim = node[i].ir.dim
                columns.extend(range(slices[i].start + channel * dim, slices[i].start + (channel + 1) * dim))
        return torch.tensor(columns, dtype=torch.long)

    @cached_property
    def blocks(self) -> tuple[tuple[int, int, int], ...]:
        """``(d, first, count)``: the group's paths ``paths[first:first+count]`` all have output
        dimension ``d``."""
        out, first = [], 0
        for d in sorted(set(self.out_dims)):
            count = self.out_dims.count(d)
            out.append((d, first, count))
            first += count
        return tuple(out)

    def weight_index(self) -> torch.Tensor:
        """``[mul * P]``: the columns of the per-edge weights that form the group's
        ``[mul, P]`` weights (channel-major, paths in group order)."""
        offsets, offset = [], 0
        for i_node, _, _ in self.spec.paths:
            offsets.append(offset)
            offset += o3.Irreps(self.spec.irreps_node)[i_node].mul
        return torch.tensor([offsets[p] + channel for channel in range(self.mul) for p in self.paths], dtype=torch.long)


def output_index(spec: ConvolutionSpec) -> torch.Tensor:
    """``[irreps_out.dim]``: where each output column (``mul_ir`` layout, one block per path)
    sits in the concatenation of the flattened message blocks ``[mul, P_d * d]`` of every
    group (in :attr:`ConvolutionSpec.channel_groups` order) and block (in
    :attr:`ChannelGroup.blocks` order)."""
    position = {}
    base = 0
    for group in spec.channel_groups:
        for d, first, count in group.blocks:
            for k in range(count):
                position[spec.paths[group.paths[first + k]][2]] = (base, k * d, count * d)
            base += group.mul * count * d
    slices = spec.irreps_out.slices()
    columns = torch.empty(spec.irreps_out.dim, dtype=torch.long)
    for i_out, (mul, ir) in enumerate(spec.irreps_out):
        block_base, offset, row = position[i_out]
        for channel in range(mul):
            for m in range(ir.dim):
                columns[slices[i_out].start + channel * ir.dim + m] = block_base + channel * row + offset + m
    return columns


def sparse_terms(spec: ConvolutionSpec):
    """The convolution as sparse terms, for the fused kernels.  Per path:
    ``(mul, node_start, node_dim, weight_offset, out_start, out_dim, terms)`` with
    ``terms[k] = [(a, j, coefficient), ...]``: output component ``k`` gets
    ``coefficient · h[a] · y[j]`` (``a`` within the node irrep, ``j`` an absolute column of the
    edge attributes), path weight included."""
    node, edge = o3.Irreps(spec.irreps_node), o3.Irreps(spec.irreps_edge)
    node_slices, edge_slices, out_slices = node.slices(), edge.slices(), spec.irreps_out.slices()
    paths, weight_offset = [], 0
    for p, (i_node, i_edge, i_out) in enumerate(spec.paths):
        mul, ir1 = node[i_node]
        ir2, ir3 = edge[i_edge].ir, spec.irreps_out[i_out].ir
        cg = o3.wigner_3j(ir1.l, ir2.l, ir3.l, dtype=torch.float64) * spec.path_weight(p)
        terms = [
            [
                (a, edge_slices[i_edge].start + j, float(cg[a, j, k]))
                for a in range(ir1.dim)
                for j in range(ir2.dim)
                if abs(float(cg[a, j, k])) > 1e-12
            ]
            for k in range(ir3.dim)
        ]
        paths.append((mul, node_slices[i_node].start, ir1.dim, weight_offset, out_slices[i_out].start, ir3.dim, terms))
        weight_offset += mul
    return paths


def _uuu_paths(irreps1: o3.Irreps, irreps2: o3.Irreps, allowed: set[o3.Irrep], symmetric: bool):
    """Channel-wise ("uuu") couplings of ``irreps1 ⊗ irreps2`` into ``allowed`` irreps;
    ``symmetric`` keeps only ``i1 <= i2``."""
    paths, irreps_out = [], []
    for i1, (mul1, ir1) in enumerate(irreps1):
        for i2, (mul2, ir2) in enumerate(irreps2):
            if symmetric and i2 < i1:
                continue
            assert mul1 == mul2
            for ir_out in ir1 * ir2:
                if ir_out in allowed:
                    paths.append((i1, i2, len(irreps_out), "uuu", False))
                    irreps_out.append((mul1, ir_out))
    return paths, o3.Irreps(irreps_out)


@dataclasses.dataclass(frozen=True)
class SymmetricContractionSpec:
    """Product basis of MACE: species-weighted symmetric products of the atomic basis.

    ``B_K = Σ_ν Σ_{paths p → K} w[z, p, c] · (A ⊗ … ⊗ A)_{p, c}`` for correlation orders
    ``ν = 1 … correlation``; second-order paths couple ``l1 <= l2``, third-order paths couple
    every second-order irrep with one more ``A``.  Weights of order ``ν`` have the layout
    ``[num_species, num_paths(ν), channels]`` and each target irrep is normalised by the
    square root of its number of paths.

    Attributes:
        irreps_in: the atomic basis ``A``, every irrep with multiplicity ``channels``.
        irreps_out: the target irreps (multiplicity ``channels``).
        correlation: highest body order (1–3).
    """

    irreps_in: str
    irreps_out: str
    correlation: int

    def __post_init__(self):
        if not 1 <= self.correlation <= 3:
            raise ValueError(f"correlation must be 1, 2 or 3, got {self.correlation}")
        muls = {mul for mul, _ in o3.Irreps(self.irreps_in)} | {mul for mul, _ in o3.Irreps(self.irreps_out)}
        if len(muls) != 1:
            raise ValueError(f"all irreps need one multiplicity, got {self.irreps_in} and {self.irreps_out}")

    @property
    def channels(self) -> int:
        return o3.Irreps(self.irreps_in)[0].mul

    @cached_property
    def _targets(self) -> set[o3.Irrep]:
        return {ir for _, ir in o3.Irreps(self.irreps_out)}

    @cached_property
    def order1_inputs(self) -> tuple[int, ...]:
        """Indices of ``irreps_in`` that are also targets (the first-order paths)."""
        return tuple(i for i, (_, ir) in enumerate(o3.Irreps(self.irreps_in)) if ir in self._targets)

    @cached_property
    def order2(self) -> tuple[list, o3.Irreps]:
        """e3nn ``uuu`` instructions and output irreps of ``A ⊗ A`` (``l1 <= l2``); holds the
        intermediates of order 3 as well when ``correlation == 3``."""
        irreps_in = o3.Irreps(self.irreps_in)
        inputs = {ir for _, ir in irreps_in}
        allowed = self._targets | (inputs if self.correlation >= 3 else set())
        return _uuu_paths(irreps_in, irreps_in, allowed, symmetric=True)

    @cached_property
    def order2_kept(self) -> tuple[int, ...]:
        """Indices of the order-2 outputs that are targets (the second-order paths)."""
        return tuple(i for i, (_, ir) in enumerate(self.order2[1]) if ir in self._targets)

    @cached_property
    def order3(self) -> tuple[list, o3.Irreps]:
        """e3nn ``uuu`` instructions and output irreps of ``(A ⊗ A) ⊗ A`` into the targets."""
        return _uuu_paths(self.order2[1], o3.Irreps(self.irreps_in), self._targets, symmetric=False)

    @cached_property
    def path_irreps(self) -> tuple[list[o3.Irrep], ...]:
        """The output irrep of every weighted path, per order."""
        irreps_in = o3.Irreps(self.irreps_in)
        orders = [[irreps_in[i].ir for i in self.order1_inputs]]
        if self.correlation >= 2:
            orders.append([self.order2[1][i].ir for i in self.order2_kept])
        if self.correlation >= 3:
            orders.append([ir for _, ir in self.order3[1]])
        return tuple(orders)

    def num_paths(self, order: int) -> int:
        return len(self.path_irreps[order - 1])

    def fan_in(self, order: int, ir: o3.Irrep) -> int:
        """Number of order-``order`` paths into target ``ir`` (at least 1)."""
        return max(sum(1 for p in self.path_irreps[order - 1] if p == ir), 1)

    def coupling(self, order: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """``[num_paths, D, …, D, D_out]`` (``order`` factors of ``D = Σ (2l+1)`` of the input
        irreps): the normalised coupling of each weighted path, so that channel ``c`` of the
        output is ``Σ_p w[p, c] · coupling[p] · A_c ⊗ … ⊗ A_c``."""
        irreps_in, irreps_out = o3.Irreps(self.irreps_in), o3.Irreps(self.irreps_out)
        dim = sum(ir.dim for _, ir in irreps_in)
        dim_out = sum(ir.dim for _, ir in irreps_out)
        in_offsets = _offsets([ir.dim for _, ir in irreps_in])
        out_offsets = {ir: off for (_, ir), off in zip(irreps_out, _offsets([ir.dim for _, ir in irreps_out]), strict=True)}
        n_paths = self.num_paths(order)
        tensor = torch.zeros(n_paths, *([dim] * order), dim_out, dtype=torch.float64)

        def place(ir_out):
            """Normalisation and output columns of a path into ``ir_out``."""
            scale = 1.0 / math.sqrt(self.fan_in(order, ir_out))
            return scale, slice(out_offsets[ir_out], out_offsets[ir_out] + ir_out.dim)

        if order == 1:
            for p, i in enumerate(self.order1_inputs):
                ir = irreps_in[i].ir
                scale, out = place(ir)
                tensor[p, in_offsets[i] : in_offsets[i] + ir.dim, out] = torch.eye(ir.dim, dtype=torch.float64) * scale
            return tensor.to(dtype)
        second = self._second_order_blocks(irreps_in, in_offsets, dim)  # [n2, D, D, d12] per order-2 output
        if order == 2:
            for p, i in enumerate(self.order2_kept):
                ir = self.order2[1][i].ir
                scale, out = place(ir)
                tensor[p, :, :, out] = second[i] * scale
            return tensor.to(dtype)
        for p, (i12, i3, _, _, _) in enumerate(self.order3[0]):
            ir12, ir3 = self.order2[1][i12].ir, irreps_in[i3].ir
            ir_out = self.order3[1][p].ir
            w3j = o3.wigner_3j(ir12.l, ir3.l, ir_out.l, dtype=torch.float64) * math.sqrt(ir_out.dim)
            scale, out = place(ir_out)
            block = torch.einsum("abm,mdk->abdk", second[i12], w3j)
            tensor[p, :, :, in_offsets[i3] : in_offsets[i3] + ir3.dim, out] = block * scale
        return tensor.to(dtype)

    def _second_order_blocks(self, irreps_in, in_offsets, dim) -> list[torch.Tensor]:
        """For each output of ``A ⊗ A`` (order-2 enumeration), its coupling ``[D, D, 2l+1]``."""
        blocks = []
        for i1, i2, i_out, _, _ in self.order2[0]:
            ir1, ir2, ir_out = irreps_in[i1].ir, irreps_in[i2].ir, self.order2[1][i_out].ir
            w3j = o3.wigner_3j(ir1.l, ir2.l, ir_out.l, dtype=torch.float64) * math.sqrt(ir_out.dim)
            block = torch.zeros(dim, dim, ir_out.dim, dtype=torch.float64)
            block[in_offsets[i1] : in_offsets[i1] + ir1.dim, in_offsets[i2] : in_offsets[i2] + ir2.dim] = w3j
            blocks.append(block)
        return blocks


def _offsets(dims: list[int]) -> list[int]:
    out, total = [], 0
    for d in dims:
        out.append(total)
        total += d
    return out


def monomials(dim: int, order: int) -> list[tuple[int, ...]]:
    """Sorted index tuples ``i1 <= i2 <= … <= i_order`` over ``range(dim)``: the distinct
    monomials ``A_i1 · … · A_i_order`` of one channel of the atomic basis."""
    return list(itertools.combinations_with_replacement(range(dim), order))


def packed_coupling(spec: SymmetricContractionSpec, order: int) -> torch.Tensor:
    """``[num_paths, num_monomials, D_out]``: :meth:`SymmetricContractionSpec.coupling` summed
    over the index permutations of each monomial, so that
    ``Σ_{i…} coupling[p, i…, K] A_i… = Σ_t packed[p, t, K] · monomial_t(A)`` exactly."""
    dense = spec.coupling(order)
    dim = dense.shape[1]
    terms = monomials(dim, order)
    packed = torch.zeros(dense.shape[0], len(terms), dense.shape[-1], dtype=torch.float64)
    for t, term in enumerate(terms):
        for permutation in set(itertools.permutations(term)):
            packed[:, t] += dense[(slice(None), *permutation)]
    return packed
