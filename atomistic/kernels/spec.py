"""The one description of a tensor-product convolution that every kernel backend implements.

A :class:`ConvolutionSpec` fixes the irreps, the list of channel-wise ("uvu") paths and the
layout of the per-edge weights.  Backends differ only in how they compute; they hold no
parameters of their own, so saved weights are identical whichever backend runs them.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property

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
