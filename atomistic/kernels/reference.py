"""Reference backend: e3nn's ``TensorProduct`` plus ``index_add``. The ground truth
that every faster backend is tested against."""

from __future__ import annotations

import torch
from e3nn import o3

from atomistic.kernels.base import TensorProductConvolution
from atomistic.kernels.spec import ConvolutionSpec


class ReferenceConvolution(TensorProductConvolution):
    backend_name = "reference"

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
        out = torch.zeros(
            node_features.shape[0], messages.shape[1], dtype=messages.dtype, device=messages.device
        )
        return out.index_add(0, centre, messages)
