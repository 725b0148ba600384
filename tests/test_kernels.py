"""Every kernel backend against the e3nn ground truth: values, first and second derivatives,
equivariance, and whole potentials (energies, forces, stress) equal across backends."""

from __future__ import annotations

import pytest
import torch
from e3nn import o3

from atomistic.checkpoint import is_derived_constant
from atomistic.kernels import (
    ConvolutionSpec,
    SymmetricContractionSpec,
    available_backends,
    make_convolution,
    make_linear,
    make_symmetric_contraction,
    resolve_backend,
)
from atomistic.models.builders import build_potential
from atomistic.testing import random_periodic_structure

from .conftest import MLEARN_SPECIES, small_mace

# on a GPU machine (scripts/gpu_check.sh) the parity tests run on CUDA
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FAST_BACKENDS = [b for b in ("reference", "cpu", "cueq", "triton") if b in available_backends() and not (b == "cpu" and DEVICE == "cuda")]

# float32: forward 1e-5, derivatives 3e-4 (relative to the largest entry); float64: 1e-10
TOLERANCES = {torch.float32: (1e-5, 3e-4), torch.float64: (1e-10, 1e-10)}


def _build(factory, spec, backend, dtype):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # e3nn bakes Clebsch-Gordan constants in the construction dtype
    try:
        return factory(spec, backend).to(DEVICE)
    finally:
        torch.set_default_dtype(previous)


def _close(actual, expected, tolerance, what):
    scale = max(1.0, expected.abs().max().item())
    error = (actual - expected).abs().max().item()
    assert error <= tolerance * scale, f"{what}: max error {error:.2e} > {tolerance:.0e} x {scale:.2g}"


def test_registry():
    assert {"reference", "e3nn"} <= set(available_backends())
    with pytest.raises(ValueError, match="unknown kernel backend 'nope'"):
        make_convolution(ConvolutionSpec("4x0e", "1x0e", 0), "nope")
    assert resolve_backend("auto", "cpu") in ("cpu", "reference")


def test_spec_layout():
    spec = ConvolutionSpec("4x0e+4x1o", "1x0e+1x1o+1x2e", lmax_out=2, parity_out=(1, -1))
    assert len(spec.paths) == len(spec.irreps_out)
    assert spec.weight_numel == 4 * len(spec.paths)
    assert spec.irreps_out.lmax == 2


CONVOLUTION_CASES = [  # (node irreps, max_ell of the edge harmonics, sort_output)
    ("8x0e", 0, False),
    ("3x0e+3x1o", 1, False),
    ("5x0e+5x1o", 2, False),
    ("4x0e+4x1o", 3, False),
    ("6x0e+3x1e+2x2e", 2, True),  # NequIP/SevenNet style: several multiplicities, sorted outputs
]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", CONVOLUTION_CASES, ids=lambda c: f"{c[0]}-ell{c[1]}")
@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_convolution_parity(backend, case, dtype):
    node, max_ell, sort_output = case
    spec = ConvolutionSpec(node, str(o3.Irreps.spherical_harmonics(max_ell)), lmax_out=max_ell, sort_output=sort_output)
    truth = _build(make_convolution, spec, "e3nn", dtype)
    fast = _build(make_convolution, spec, backend, dtype)
    generator = torch.Generator().manual_seed(len(node) + max_ell)
    n_nodes, n_edges = 6, 40

    def random(*shape):
        return torch.randn(*shape, generator=generator, dtype=dtype).to(DEVICE).requires_grad_()

    h, y, w = random(n_nodes, o3.Irreps(node).dim), random(n_edges, o3.Irreps.spherical_harmonics(max_ell).dim), random(n_edges, spec.weight_numel)
    centre = torch.randint(0, n_nodes, (n_edges,), generator=generator).to(DEVICE)
    neighbour = torch.randint(0, n_nodes, (n_edges,), generator=generator).to(DEVICE)
    forward_tol, derivative_tol = TOLERANCES[dtype]

    expected, actual = truth(h, y, w, centre, neighbour), fast(h, y, w, centre, neighbour)
    _close(actual, expected, forward_tol, "forward")
    # the probe stands for dE/d(output), which itself depends on the parameters in training
    probe = torch.randn(expected.shape, generator=generator, dtype=dtype).to(DEVICE).requires_grad_()
    grads_expected = torch.autograd.grad(expected, (h, y, w), probe, create_graph=True)
    grads_actual = torch.autograd.grad(actual, (h, y, w), probe, create_graph=True)
    for name, a, e in zip(("node", "edge", "weight"), grads_actual, grads_expected, strict=True):
        _close(a, e, derivative_tol, f"d/d{name}")
    # second derivatives: what a force loss differentiates during training (each upstream
    # gradient on its own too, so that every term of the double backward is checked)
    weights = [torch.randn(g.shape, generator=generator, dtype=dtype).to(DEVICE) for g in grads_expected]
    for mask in ((1, 1, 1), (1, 0, 0), (0, 1, 0), (0, 0, 1)):
        loss_expected = sum(m * (c * g**2).sum() for m, c, g in zip(mask, weights, grads_expected, strict=True) if m)
        loss_actual = sum(m * (c * g**2).sum() for m, c, g in zip(mask, weights, grads_actual, strict=True) if m)
        second_expected = torch.autograd.grad(loss_expected, (h, y, w, probe), allow_unused=True, retain_graph=True)
        second_actual = torch.autograd.grad(loss_actual, (h, y, w, probe), allow_unused=True, retain_graph=True)
        for name, a, e in zip(("node", "edge", "weight", "probe"), second_actual, second_expected, strict=True):
            if e is None:
                assert a is None or float(a.abs().max()) == 0.0, f"{mask} second derivative d/d{name}"
            else:
                _close(a, e, derivative_tol, f"{mask} second derivative d/d{name}")


@pytest.mark.parametrize("backend", ["e3nn", *FAST_BACKENDS])
def test_convolution_equivariance_and_sum(backend):
    torch.manual_seed(0)
    spec = ConvolutionSpec("3x0e+3x1o", "1x0e+1x1o+1x2e", lmax_out=2)
    conv = _build(make_convolution, spec, backend, torch.float64)
    n_nodes, n_edges = 5, 17
    centre = torch.randint(0, n_nodes, (n_edges,)).to(DEVICE)
    neighbour = torch.randint(0, n_nodes, (n_edges,)).to(DEVICE)
    vectors = torch.randn(n_edges, 3, dtype=torch.float64).to(DEVICE)
    sh = o3.SphericalHarmonics("1x0e+1x1o+1x2e", normalize=True, normalization="component").to(DEVICE)
    h = torch.randn(n_nodes, o3.Irreps(spec.irreps_node).dim, dtype=torch.float64).to(DEVICE)
    w = torch.randn(n_edges, spec.weight_numel, dtype=torch.float64).to(DEVICE)
    out = conv(h, sh(vectors), w, centre, neighbour)
    rotation = o3.rand_matrix(dtype=torch.float64)
    d_in = o3.Irreps(spec.irreps_node).D_from_matrix(rotation).to(DEVICE)
    d_out = spec.irreps_out.D_from_matrix(rotation).to(DEVICE)
    rotated = conv(h @ d_in.T, sh(vectors @ rotation.to(DEVICE).T), w, centre, neighbour)
    # e3nn builds Wigner D matrices from float32 tables, so ~1e-7 is the best this comparison can do
    torch.testing.assert_close(rotated, out @ d_out.T, atol=1e-5, rtol=1e-5)
    # messages are summed at the centre: splitting the edges in two and adding gives the same
    half = n_edges // 2
    parts = conv(h, sh(vectors[:half]), w[:half], centre[:half], neighbour[:half]) + conv(
        h, sh(vectors[half:]), w[half:], centre[half:], neighbour[half:]
    )
    torch.testing.assert_close(parts, out, atol=1e-12, rtol=0)


CONTRACTION_CASES = [  # (max_ell of the atomic basis, hidden lmax, correlation, channels)
    (0, 0, 1, 4),
    (1, 1, 2, 3),
    (2, 1, 3, 4),
    (2, 2, 2, 2),
    (3, 1, 3, 2),  # the shipped models' shape: l <= 3 basis, 0e + 1o out, body order 4
]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", CONTRACTION_CASES, ids=lambda c: "ell{}-h{}-corr{}-c{}".format(*c))
@pytest.mark.parametrize("backend", [b for b in FAST_BACKENDS if b != "triton"])  # triton uses reference's
def test_symmetric_contraction_parity(backend, case, dtype):
    max_ell, hidden_lmax, correlation, channels = case
    irreps_in = o3.Irreps([(channels, (degree, (-1) ** degree)) for degree in range(max_ell + 1)])
    irreps_out = o3.Irreps([(channels, (degree, (-1) ** degree)) for degree in range(hidden_lmax + 1)])
    spec = SymmetricContractionSpec(str(irreps_in), str(irreps_out), correlation)
    truth = _build(make_symmetric_contraction, spec, "e3nn", dtype)
    fast = _build(make_symmetric_contraction, spec, backend, dtype)
    generator = torch.Generator().manual_seed(max_ell + correlation)
    num_species, n_atoms = 3, 11
    a = torch.randn(n_atoms, irreps_in.dim, generator=generator, dtype=dtype).to(DEVICE).requires_grad_()
    species = torch.randint(0, num_species, (n_atoms,), generator=generator).to(DEVICE)
    weights = [
        torch.randn(num_species, spec.num_paths(order), channels, generator=generator, dtype=dtype).to(DEVICE).requires_grad_()
        for order in range(1, correlation + 1)
    ]
    forward_tol, derivative_tol = TOLERANCES[dtype]
    expected, actual = truth(a, species, weights), fast(a, species, weights)
    _close(actual, expected, forward_tol, "forward")
    # the probe stands for dE/d(output), which itself depends on the parameters in training
    probe = torch.randn(expected.shape, generator=generator, dtype=dtype).to(DEVICE).requires_grad_()
    inputs = (a, *weights)
    grads_expected = torch.autograd.grad(expected, inputs, probe, create_graph=True)
    grads_actual = torch.autograd.grad(actual, inputs, probe, create_graph=True)
    for k, (g_a, g_e) in enumerate(zip(grads_actual, grads_expected, strict=True)):
        _close(g_a, g_e, derivative_tol, f"derivative {k}")
    # second derivatives (a force loss in training): the upstream gradient of the basis
    # derivative and of the weight derivatives, together and each alone
    scales = [torch.randn(g.shape, generator=generator, dtype=dtype).to(DEVICE) for g in grads_expected]
    for mask in ((1,) * len(inputs), (1,) + (0,) * correlation, (0,) + (1,) * correlation):
        loss_expected = sum((c * g**2).sum() for m, c, g in zip(mask, scales, grads_expected, strict=True) if m)
        loss_actual = sum((c * g**2).sum() for m, c, g in zip(mask, scales, grads_actual, strict=True) if m)
        second_expected = torch.autograd.grad(loss_expected, (*inputs, probe), allow_unused=True, retain_graph=True)
        second_actual = torch.autograd.grad(loss_actual, (*inputs, probe), allow_unused=True, retain_graph=True)
        for k, (g_a, g_e) in enumerate(zip(second_actual, second_expected, strict=True)):
            if g_e is None:
                assert g_a is None or float(g_a.abs().max()) == 0.0, f"{mask} second derivative {k}"
            else:
                _close(g_a, g_e, derivative_tol, f"{mask} second derivative {k}")
    # one species only takes the single-species path of the reference backend
    same = torch.zeros_like(species)
    _close(fast(a, same, weights), truth(a, same, weights), forward_tol, "forward, one species")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("irreps", [("4x0e+4x1o", "4x0e+4x1o"), ("3x0e+2x1o+2x2e", "5x0e+1x1o+3x2e"), ("2x0e+2x1o+2x2e+2x3o+2x0e", "2x0e+2x1o")])
@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_linear_parity(backend, irreps, dtype):
    """Equivariant linear layers: same parameters (e3nn layout), same values and gradients."""
    irreps_in, irreps_out = irreps
    truth = _build(lambda spec, b: make_linear(*spec, b), irreps, "e3nn", dtype)
    fast = _build(lambda spec, b: make_linear(*spec, b), irreps, backend, dtype)
    fast.load_state_dict(truth.state_dict(), strict=False)
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(7, o3.Irreps(irreps_in).dim, generator=generator, dtype=dtype).to(DEVICE).requires_grad_()
    forward_tol, derivative_tol = TOLERANCES[dtype]
    expected, actual = truth(x), fast(x)
    _close(actual, expected, forward_tol, "forward")
    probe = torch.randn(expected.shape, generator=generator, dtype=dtype).to(DEVICE)
    for a, e in zip(torch.autograd.grad(actual, (x, fast.weight), probe), torch.autograd.grad(expected, (x, truth.weight), probe), strict=True):
        _close(a, e, derivative_tol, "gradient")


@pytest.mark.slow
def test_symmetric_contraction_parity_ell3_cueq():
    """cuEquivariance builds its l = 3 symmetric basis slowly (~1 min): slow test."""
    if "cueq" not in available_backends():
        pytest.skip("cuequivariance-torch not installed")
    test_symmetric_contraction_parity("cueq", (3, 1, 3, 2), torch.float64)


@pytest.mark.parametrize("species_cutoffs", [None, (4.0, 3.0, 3.5, 2.6)], ids=["one-cutoff", "per-species-cutoffs"])
@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_potential_equal_across_backends(backend, species_cutoffs):
    """A whole potential (energy, forces, stress) gives the same numbers on every backend,
    from one set of weights (with per-species cutoffs, on the edges left after dropping)."""
    truth = small_mace(2, 1, 3, 2, backend="e3nn", species_cutoffs=species_cutoffs).to(DEVICE)
    fast = build_potential(truth.metadata.architecture, backend=backend, dtype=torch.float64, device=DEVICE)
    missing, unexpected = fast.load_state_dict(
        {k: v for k, v in truth.state_dict().items() if not is_derived_constant(k)}, strict=False
    )
    assert not unexpected and all(is_derived_constant(k) for k in missing)
    atoms = random_periodic_structure(MLEARN_SPECIES, n_atoms=6, seed=11)
    [expected] = truth.predict([atoms])
    [actual] = fast.predict([atoms])
    assert abs(actual["energy"] - expected["energy"]) < 1e-10
    torch.testing.assert_close(torch.as_tensor(actual["forces"]), torch.as_tensor(expected["forces"]), atol=1e-10, rtol=0)
    torch.testing.assert_close(torch.as_tensor(actual["stress"]), torch.as_tensor(expected["stress"]), atol=1e-10, rtol=0)


def test_cpu_extension_build_directory_is_keyed_by_source(tmp_path, monkeypatch):
    """One build per source text (shared by every checkout, the source copied inside it); a
    changed source builds beside the old one."""
    from atomistic.kernels import cpu_fused

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    directory = cpu_fused.build_directory()
    assert directory == cpu_fused.build_directory()
    assert directory.parent == tmp_path / "extensions"
    for source in cpu_fused.SOURCES:
        assert (directory / source.name).read_bytes() == source.read_bytes()
    assert sorted(p.name for p in directory.iterdir()) == sorted(s.name for s in cpu_fused.SOURCES)  # no partial copies left

    first, *rest = cpu_fused.SOURCES
    edited = tmp_path / "checkout" / first.name
    edited.parent.mkdir()
    edited.write_bytes(first.read_bytes() + b"\n// edited\n")
    monkeypatch.setattr(cpu_fused, "SOURCES", (edited, *rest))
    assert cpu_fused.build_directory() != directory


def test_cpu_extension_build_waits_for_a_live_lock_and_clears_an_abandoned_one(tmp_path):
    """torch waits forever on its build lock; a lock that goes away (a build that finished) ends
    the wait quietly, one older than the limit (a killed build) is removed with a warning."""
    import os
    import threading
    import time
    import warnings

    from atomistic.kernels.cpu_fused import wait_for_other_build

    wait_for_other_build(tmp_path)  # no lock: returns at once
    lock = tmp_path / "lock"
    lock.touch()
    threading.Timer(0.3, lock.unlink).start()  # the other build finishes
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wait_for_other_build(tmp_path, max_age_seconds=60.0, poll_seconds=0.05)
    assert not lock.exists()

    lock.touch()
    old = time.time() - 59.7  # abandoned 0.3 s from now
    os.utime(lock, (old, old))
    with pytest.warns(UserWarning, match="abandoned"):
        wait_for_other_build(tmp_path, max_age_seconds=60.0, poll_seconds=0.05)
    assert not lock.exists()


@pytest.mark.skipif("cpu" not in available_backends(), reason="needs a C++ compiler")
def test_cpu_symmetric_contraction_no_atoms_and_bad_species():
    """Zero atoms give an empty result; a species index outside the weights is refused by the
    kernel (never read out of bounds)."""
    spec = SymmetricContractionSpec("2x0e+2x1o", "2x0e+2x1o", 3)
    contraction = make_symmetric_contraction(spec, "cpu")
    weights = [torch.randn(2, spec.num_paths(order), 2) for order in (1, 2, 3)]
    assert contraction(torch.zeros(0, 8), torch.zeros(0, dtype=torch.long), weights).shape == (0, 8)
    with pytest.raises(RuntimeError, match="species index 2 of atom 2 is outside"):
        contraction(torch.randn(3, 8), torch.tensor([0, 1, 2]), weights)


@pytest.mark.skipif("cpu" not in available_backends(), reason="needs a C++ compiler")
def test_cpu_symmetric_contraction_weight_gradient_is_deterministic():
    """The weight gradient sums over atoms across threads in a fixed order: repeated calls agree
    bit for bit (a resumed training run must match an uninterrupted one)."""
    spec = SymmetricContractionSpec("8x0e+8x1o+8x2e", "8x0e+8x1o", 3)
    contraction = make_symmetric_contraction(spec, "cpu")
    generator = torch.Generator().manual_seed(3)
    basis = torch.randn(200, o3.Irreps(spec.irreps_in).dim, generator=generator, requires_grad=True)
    species = torch.randint(0, 3, (200,), generator=generator)
    weights = [torch.randn(3, spec.num_paths(order), 8, generator=generator, requires_grad=True) for order in (1, 2, 3)]

    def weight_gradients():
        out = contraction(basis, species, weights)
        (force_like,) = torch.autograd.grad(out.pow(2).sum(), basis, create_graph=True)
        return torch.autograd.grad(force_like.pow(2).sum() + out.sum(), weights)

    first = weight_gradients()
    for _ in range(5):
        for a, b in zip(weight_gradients(), first, strict=True):
            assert torch.equal(a, b)
