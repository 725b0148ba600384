from __future__ import annotations

import pytest
import torch
from e3nn import o3

from atomistic.kernels import ConvolutionSpec, available_backends, make_convolution


def test_registry():
    assert "reference" in available_backends()
    with pytest.raises(ValueError, match="unknown kernel backend 'nope'"):
        make_convolution(ConvolutionSpec("4x0e", "1x0e", 0), "nope")


def test_spec_layout():
    spec = ConvolutionSpec("4x0e+4x1o", "1x0e+1x1o+1x2e", lmax_out=2, parity_out=(1, -1))
    assert len(spec.paths) == len(spec.irreps_out)
    assert spec.weight_numel == 4 * len(spec.paths)
    assert spec.irreps_out.lmax == 2


@pytest.mark.parametrize("backend", available_backends())
def test_convolution_equivariance_and_sum(backend):
    torch.manual_seed(0)
    spec = ConvolutionSpec("3x0e+3x1o", "1x0e+1x1o+1x2e", lmax_out=2)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # e3nn bakes Clebsch-Gordan constants in the construction dtype
    try:
        conv = make_convolution(spec, backend)
    finally:
        torch.set_default_dtype(previous)
    n_nodes, n_edges = 5, 17
    centre = torch.randint(0, n_nodes, (n_edges,))
    neighbour = torch.randint(0, n_nodes, (n_edges,))
    vectors = torch.randn(n_edges, 3, dtype=torch.float64)
    sh = o3.SphericalHarmonics("1x0e+1x1o+1x2e", normalize=True, normalization="component")
    h = torch.randn(n_nodes, o3.Irreps(spec.irreps_node).dim, dtype=torch.float64)
    w = torch.randn(n_edges, spec.weight_numel, dtype=torch.float64)
    out = conv(h, sh(vectors), w, centre, neighbour)
    rotation = o3.rand_matrix(dtype=torch.float64)
    d_in = o3.Irreps(spec.irreps_node).D_from_matrix(rotation)
    d_out = spec.irreps_out.D_from_matrix(rotation)
    rotated = conv(h @ d_in.T, sh(vectors @ rotation.T), w, centre, neighbour)
    # e3nn builds Wigner D matrices from float32 tables, so ~1e-7 is the best this comparison can do
    torch.testing.assert_close(rotated, out @ d_out.T, atol=1e-5, rtol=1e-5)
    # messages are summed at the centre: splitting the edges in two and adding gives the same
    half = n_edges // 2
    parts = conv(h, sh(vectors[:half]), w[:half], centre[:half], neighbour[:half]) + conv(
        h, sh(vectors[half:]), w[half:], centre[half:], neighbour[half:]
    )
    torch.testing.assert_close(parts, out, atol=1e-12, rtol=0)
