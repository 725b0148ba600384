"""CPU backend: the fused convolution as a C++/OpenMP kernel (``csrc/fused_convolution.cpp``),
and the build of the extension that holds it.

Like the Triton kernel, it gathers the sender features, couples them with the edge attributes
under the per-edge weights term by term (the non-zero Clebsch–Gordan coefficients of the
spec) and sums into the receiver without writing per-edge messages to memory.  Edges are
walked in receiver order (and in sender order for the node-feature gradient), so each thread
owns the rows it writes.  Channels are the innermost, contiguous loop (node features are
transposed to ``ir_mul`` inside the operation).  The backward pass runs in C++ too, and so does
its derivative (training with a force loss): the convolution is trilinear, so the derivatives
of its vector–Jacobian product are sums of the same products at swapped arguments, each
summed in one fused pass (``_FusedConvolutionTranspose``).  The symmetric contraction's sparse
kernel (:mod:`atomistic.kernels.cpu_symmetric`) is compiled into the same extension.

The extension is compiled with the system C++ compiler on first use (``torch.utils.
cpp_extension``, about a minute) into a directory of ``$TORCH_EXTENSIONS_DIR`` named by the
hash of its source, flags and the torch and Python versions: every checkout of the same source
shares one build, and a changed source builds beside the old one instead of over it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

import torch
from e3nn import o3

from atomistic.kernels.base import TensorProductConvolution
from atomistic.kernels.spec import ConvolutionSpec, sparse_terms

CSRC = Path(__file__).parent / "csrc"
SOURCES = (CSRC / "fused_convolution.cpp", CSRC / "symmetric_contraction.cpp", CSRC / "bindings.cpp")
EXTENSION_NAME = "atomistic_fused_convolution"
CFLAGS = ("-O3", "-fopenmp")
LDFLAGS = ("-fopenmp",)
# torch's build lock is a bare file: a build killed mid-way leaves it behind and every later
# build waits on it forever. A build takes about a minute; a lock this old is abandoned.
STALE_LOCK_SECONDS = 600.0


def compiler_present() -> bool:
    try:
        import ninja  # noqa: F401
    except ImportError:
        return False
    return shutil.which("c++") is not None or shutil.which("g++") is not None


def build_directory() -> Path:
    """Where the extension is built: ``$TORCH_EXTENSIONS_DIR/<name>_<hash>``, with a copy of the
    sources inside it.

    torch names its build directory after the extension alone and compiles the sources from
    where they lie, so two checkouts at different paths would each rebuild over the other's
    build (ninja sees a changed command line). Here the directory is keyed by what the binary
    depends on, and compiling the copies keeps the command line the same for every checkout."""
    from torch.utils.cpp_extension import get_default_build_root

    digest = hashlib.sha256()
    for source in SOURCES:
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    for part in (torch.__version__, sys.version, *CFLAGS, *LDFLAGS):
        digest.update(part.encode())
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root())
    directory = root / f"{EXTENSION_NAME}_{digest.hexdigest()[:16]}"
    directory.mkdir(parents=True, exist_ok=True)
    for source in SOURCES:
        _copy_once(source, directory / source.name)
    return directory


def _copy_once(source: Path, copy: Path) -> None:
    """Write ``copy`` once, atomically (a newer copy would make ninja rebuild)."""
    if copy.exists():
        return
    partial = copy.parent / f".{copy.name}.{os.getpid()}"
    partial.write_bytes(source.read_bytes())
    try:
        os.link(partial, copy)  # atomic, and fails if another process got there first
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links
        if not copy.exists():
            os.replace(partial, copy)
    finally:
        partial.unlink(missing_ok=True)


def wait_for_other_build(directory: Path, max_age_seconds: float = STALE_LOCK_SECONDS, poll_seconds: float = 1.0) -> None:
    """Wait while another process holds the build lock of ``directory``; once the lock is older
    than ``max_age_seconds`` its build was killed: remove it (with a warning) and go on.

    torch's own wait has no time limit, so this runs before it."""
    lock = directory / "lock"
    while True:
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            return
        if age > max_age_seconds:
            warnings.warn(f"removing the build lock {lock}, abandoned {age / 60:.0f} min ago by a build that did not finish", stacklevel=2)
            lock.unlink(missing_ok=True)
            return
        time.sleep(poll_seconds)


@functools.cache
def extension():
    """The compiled extension (built once per source and machine, see ``build_directory``)."""
    from torch.utils.cpp_extension import load

    directory = build_directory()
    wait_for_other_build(directory)
    return load(
        name=EXTENSION_NAME,
        sources=[str(directory / source.name) for source in SOURCES],
        extra_cflags=list(CFLAGS),
        extra_ldflags=list(LDFLAGS),
        build_directory=str(directory),
        verbose=False,
    )


@functools.cache
def extension_builds() -> bool:
    """Whether the extension compiles and loads here (compiles it on the first call).

    The answer is kept for the life of the process, so ``auto`` resolves to the same backend
    for every model built in it (a build that failed once, say on a lock another process
    held, must not switch a later model of the same process to another kernel)."""
    if not compiler_present():
        return False
    try:
        extension()
    except Exception:  # noqa: BLE001 - any build failure means: not available here
        return False
    return True


def ir_mul_index(irreps: o3.Irreps) -> torch.Tensor:
    """``[irreps.dim]``: for each ``ir_mul`` column, the ``mul_ir`` column it comes from."""
    columns = []
    for (mul, ir), block in zip(irreps, irreps.slices(), strict=True):
        columns.extend(block.start + c * ir.dim + m for m in range(ir.dim) for c in range(mul))
    return torch.tensor(columns, dtype=torch.long)


def _csr(index: torch.Tensor, n_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Edges sorted by ``index`` and the row pointers ``[n_nodes + 1]``."""
    order = torch.argsort(index, stable=True)
    pointers = torch.zeros(n_nodes + 1, dtype=torch.long)
    pointers[1:] = torch.cumsum(torch.bincount(index, minlength=n_nodes), 0)
    return order, pointers


def _convolve(module, node_features, edge_attrs, edge_weights, centre, neighbour, centre_csr=None) -> torch.Tensor:
    """``T(h, Y, w)``: the fused forward, ``node_features [n_nodes, irreps_node.dim]`` (mul_ir)
    → ``[n_nodes, irreps_out.dim]`` (mul_ir); ``centre_csr``: ``_csr(centre)`` when the caller
    has it.  No autograd."""
    h = node_features.index_select(1, module.node_to_ir_mul).contiguous()
    by_centre, centre_ptr = centre_csr if centre_csr is not None else _csr(centre, node_features.shape[0])
    out = extension().fused_forward(
        h, edge_attrs.contiguous(), edge_weights.contiguous(), neighbour.contiguous(), by_centre, centre_ptr,
        module.paths, module.terms, module.coefs.to(h.dtype), module.path_terms, module.out_dim,
    )
    return out.index_select(1, module.out_from_ir_mul)


def _transpose(module, grad, node_features, edge_attrs, edge_weights, centre, neighbour, need_h, need_y, need_w, neighbour_csr=None):
    """``(T_h*, T_Y*, T_w*)(grad)``: the fused vector–Jacobian products of ``T`` at ``(h, Y, w)``
    for ``grad [n_nodes, irreps_out.dim]`` (mul_ir); each is None unless asked for;
    ``neighbour_csr``: ``_csr(neighbour)`` when the caller has it.  No autograd."""
    h = node_features.index_select(1, module.node_to_ir_mul).contiguous()
    g = grad.index_select(1, module.out_to_ir_mul).contiguous()
    by_neighbour, neighbour_ptr = neighbour_csr if neighbour_csr is not None else _csr(neighbour, node_features.shape[0])
    grad_h, grad_y, grad_w = extension().fused_backward(
        g, h, edge_attrs.contiguous(), edge_weights.contiguous(), centre.contiguous(), neighbour.contiguous(),
        by_neighbour, neighbour_ptr, module.paths, module.terms, module.coefs.to(h.dtype), module.path_terms,
        need_h, need_y, need_w,
    )
    return (grad_h.index_select(1, module.node_from_ir_mul) if need_h else None, grad_y if need_y else None, grad_w if need_w else None)


class _FusedConvolution(torch.autograd.Function):
    @staticmethod
    def forward(ctx, node_features, edge_attrs, edge_weights, centre, neighbour, module):
        ctx.save_for_backward(node_features, edge_attrs, edge_weights, centre, neighbour)
        ctx.module = module
        return _convolve(module, node_features, edge_attrs, edge_weights, centre, neighbour)

    @staticmethod
    def backward(ctx, grad):
        node_features, edge_attrs, edge_weights, centre, neighbour = ctx.saved_tensors
        if torch.is_grad_enabled():  # the backward will be differentiated (force loss): a fused, differentiable VJP
            grads = _FusedConvolutionTranspose.apply(grad, node_features, edge_attrs, edge_weights, centre, neighbour, ctx.module)
            return (*(g if need else None for g, need in zip(grads, ctx.needs_input_grad[:3], strict=True)), None, None, None)
        need_h, need_y, need_w = ctx.needs_input_grad[:3]
        grads = _transpose(ctx.module, grad, node_features, edge_attrs, edge_weights, centre, neighbour, need_h, need_y, need_w)
        return (*grads, None, None, None)


class _FusedConvolutionTranspose(torch.autograd.Function):
    """The vector–Jacobian product ``(T_h*, T_Y*, T_w*)(g)`` of the trilinear convolution ``T``
    as a differentiable operation, so that a force loss trains through fused kernels: its
    derivative is the same products at swapped arguments (:func:`transpose_derivative`), summed
    in one fused pass per derivative (:func:`_double_backward`).  Third derivatives are not
    supported.
    """

    @staticmethod
    def forward(ctx, grad, node_features, edge_attrs, edge_weights, centre, neighbour, module):
        ctx.save_for_backward(grad, node_features, edge_attrs, edge_weights, centre, neighbour)
        ctx.module = module
        ctx.set_materialize_grads(False)  # an unused output arrives as None: its terms are skipped
        n_nodes = node_features.shape[0]  # the edge orderings, sorted once for every call below
        ctx.centre_csr, ctx.neighbour_csr = _csr(centre, n_nodes), _csr(neighbour, n_nodes)
        return _transpose(module, grad, node_features, edge_attrs, edge_weights, centre, neighbour, True, True, True, ctx.neighbour_csr)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, a_h, a_y, a_w):
        g, h, y, w, centre, neighbour = ctx.saved_tensors
        return (*_double_backward(ctx.module, g, h, y, w, a_h, a_y, a_w, centre, neighbour, ctx.centre_csr, ctx.neighbour_csr), None, None, None)


def _double_backward(module, g, h, y, w, a_h, a_y, a_w, centre, neighbour, centre_csr, neighbour_csr):
    """``(grad_g, grad_h, grad_y, grad_w)``: the derivative of ``(T_h*, T_Y*, T_w*)(g)`` at
    ``(h, Y, w)`` for upstream gradients ``(a_h, a_Y, a_w)`` (each may be None), the sums of
    :func:`atomistic.kernels.base.transpose_derivative` in one fused pass per output instead of
    three kernel calls for each. ``g [n_nodes, irreps_out.dim]`` and ``h, a_h [n_nodes,
    irreps_node.dim]`` are mul_ir; a derivative no upstream gradient reaches is None.  No autograd."""
    empty = h.new_empty(0)
    to_node = module.node_to_ir_mul
    grad_g, grad_h, grad_y, grad_w = extension().fused_double_backward(
        g.index_select(1, module.out_to_ir_mul).contiguous(),
        h.index_select(1, to_node).contiguous(),
        y.contiguous(),
        w.contiguous(),
        empty if a_h is None else a_h.index_select(1, to_node).contiguous(),
        empty if a_y is None else a_y.contiguous(),
        empty if a_w is None else a_w.contiguous(),
        a_h is not None, a_y is not None, a_w is not None,
        centre.contiguous(), neighbour.contiguous(), *centre_csr, *neighbour_csr,
        module.paths, module.terms, module.coefs.to(h.dtype), module.path_terms,
    )
    has_h, has_y, has_w = a_h is not None, a_y is not None, a_w is not None
    return (
        grad_g.index_select(1, module.out_from_ir_mul) if has_h or has_y or has_w else None,
        grad_h.index_select(1, module.node_from_ir_mul) if has_y or has_w else None,
        grad_y if has_h or has_w else None,
        grad_w if has_h or has_y else None,
    )


class CpuFusedConvolution(TensorProductConvolution):
    backend_name = "cpu"

    def __init__(self, spec: ConvolutionSpec):
        super().__init__(spec)
        spec.require_edge_multiplicity_one("the cpu convolution")
        extension()  # compile now, not inside the first forward
        node_irreps = o3.Irreps(spec.irreps_node)
        paths, terms, coefs, path_terms = [], [], [], [0]
        for mul, node_start, node_dim, weight_offset, out_start, out_dim, path_terms_k in sparse_terms(spec):
            paths.append((mul, node_start, node_dim, weight_offset, out_start, out_dim))
            for k, entries in enumerate(path_terms_k):
                for a, j, coefficient in entries:
                    terms.append((k, a, j))
                    coefs.append(coefficient)
            path_terms.append(len(terms))
        self.paths = torch.tensor(paths, dtype=torch.long)
        self.terms = torch.tensor(terms, dtype=torch.long).reshape(-1, 3)
        self.coefs = torch.tensor(coefs, dtype=torch.float64)
        self.path_terms = torch.tensor(path_terms, dtype=torch.long)
        self.out_dim = spec.irreps_out.dim
        self.node_to_ir_mul = ir_mul_index(node_irreps)
        self.node_from_ir_mul = self.node_to_ir_mul.argsort()
        self.out_to_ir_mul = ir_mul_index(spec.irreps_out)
        self.out_from_ir_mul = self.out_to_ir_mul.argsort()

    def forward(self, node_features, edge_attrs, edge_weights, centre, neighbour):
        if not node_features.device.type == "cpu":
            raise ValueError("the cpu kernel backend runs on CPU tensors; use backend='auto' on GPU")
        return _FusedConvolution.apply(node_features, edge_attrs, edge_weights, centre, neighbour, self)
