"""The e3nn backend: e3nn ``TensorProduct`` modules, path by path.  Slow but simple; it is the
ground truth that the other backends are tested against."""

from __future__ import annotations

import torch
from e3nn import o3

from atomistic.kernels.base import SymmetricContraction, TensorProductConvolution
from atomistic.kernels.spec import ConvolutionSpec, SymmetricContractionSpec


class E3nnConvolution(TensorProductConvolution):
    backend_name = "e3nn"

    def __init__(self, spec: ConvolutionSpec):
        super().__init__(spec)
        self.tensor_product = o3.TensorProduct(
            o3.Irreps(spec.irreps_node),
            o3.Irreps(spec.irreps_edge),
            spec.irreps_out,
            spec.instructions,
            shared_weights=False,
            internal_weights=False,
        )
        assert self.tensor_product.weight_numel == spec.weight_numel

    def forward(self, node_features, edge_attrs, edge_weights, centre, neighbour):
        messages = self.tensor_product(node_features[neighbour], edge_attrs, edge_weights)
        out = torch.zeros(node_features.shape[0], messages.shape[1], dtype=messages.dtype, device=messages.device)
        return out.index_add(0, centre, messages)


class E3nnSymmetricContraction(SymmetricContraction):
    """``A ⊗ A`` and ``(A ⊗ A) ⊗ A`` with e3nn ``uuu`` tensor products, then the species
    weights summed path block by path block."""

    backend_name = "e3nn"

    def __init__(self, spec: SymmetricContractionSpec):
        super().__init__(spec)
        irreps_in = o3.Irreps(spec.irreps_in)
        self.product2 = self.product3 = None
        if spec.correlation >= 2:
            paths2, irreps2 = spec.order2
            self.product2 = o3.TensorProduct(irreps_in, irreps_in, irreps2, paths2, irrep_normalization="component")
        if spec.correlation >= 3:
            paths3, irreps3 = spec.order3
            self.product3 = o3.TensorProduct(spec.order2[1], irreps_in, irreps3, paths3, irrep_normalization="component")

    def _weigh(self, order: int, x: torch.Tensor, path_irreps: o3.Irreps, weights: torch.Tensor) -> torch.Tensor:
        """``x [n, path_irreps.dim]`` (one block per path), ``weights [n, n_paths, C]``."""
        slices = path_irreps.slices()
        channels = self.spec.channels
        outputs = []
        for mul, ir in o3.Irreps(self.spec.irreps_out):
            group = [k for k, (_, ir_p) in enumerate(path_irreps) if ir_p == ir]
            if not group:
                outputs.append(x.new_zeros(x.shape[0], mul * ir.dim))
                continue
            blocks = torch.stack([x[:, slices[k]].reshape(-1, channels, ir.dim) for k in group], dim=1)
            summed = (blocks * weights[:, group, :, None]).sum(dim=1) / self.spec.fan_in(order, ir) ** 0.5
            outputs.append(summed.reshape(-1, mul * ir.dim))
        return torch.cat(outputs, dim=-1)

    @staticmethod
    def _select(x: torch.Tensor, irreps: o3.Irreps, indices) -> tuple[torch.Tensor, o3.Irreps]:
        slices = irreps.slices()
        return torch.cat([x[:, slices[i]] for i in indices], dim=-1), o3.Irreps([irreps[i] for i in indices])

    def forward(self, atomic_basis, species, weights):
        irreps_in = o3.Irreps(self.spec.irreps_in)
        x1, irreps1 = self._select(atomic_basis, irreps_in, self.spec.order1_inputs)
        out = self._weigh(1, x1, irreps1, weights[0][species])
        if self.product2 is not None:
            a2 = self.product2(atomic_basis, atomic_basis)
            x2, irreps2 = self._select(a2, self.product2.irreps_out, self.spec.order2_kept)
            out = out + self._weigh(2, x2, irreps2, weights[1][species])
            if self.product3 is not None:
                a3 = self.product3(a2, atomic_basis)
                out = out + self._weigh(3, a3, self.product3.irreps_out, weights[2][species])
        return out
