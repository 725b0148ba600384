// Fused channel-wise tensor-product convolution on CPU (OpenMP):
// gather sender features -> couple with edge attributes under per-edge weights -> sum into
// the receiver, without writing per-edge messages to memory.
//
// Layouts (all contiguous):
//   h      [n_nodes, node_dim]   node features, each irrep block as [2l+1, mul] (ir_mul)
//   y      [n_edges, edge_dim]   edge attributes
//   w      [n_edges, weight_dim] per-edge weights, per path [mul]
//   out    [n_nodes, out_dim]    messages summed per receiver, per path [2l+1, mul] (ir_mul)
//   paths  [n_paths, 6] int64    (mul, node_start, node_dim, weight_offset, out_start, out_dim)
//   terms  [n_terms, 3] int64    (k, a, j): output component k += coef * h[a] * y[j], grouped
//   coefs  [n_terms]             by path; path_terms [n_paths + 1] delimits each path's terms
// Edges are visited in CSR order: by_centre / centre_ptr for the forward pass and edge
// gradients, by_neighbour / neighbour_ptr for the node-feature gradient, so every thread owns
// the rows it writes and no atomics are needed.
#include <algorithm>
#include <torch/extension.h>
#include <omp.h>
#include <vector>

namespace {

// Three kernels, each a sum of the convolution T(h, y, w) or one of its vector-Jacobian
// products at swapped arguments, in one pass over the edges. The double backward (a force loss
// differentiates the backward), for upstream gradients (a_h, a_y, a_w) at (g; h, y, w):
//   grad_g = T(a_h, y, w) + T(h, a_y, w) + T(h, y, a_w)       (by centre)
//   grad_y = T_y*(g; a_h, w) + T_y*(g; h, a_w)                  (by edge)
//   grad_w = T_w*(g; a_h, y) + T_w*(g; h, a_y)                  (by edge)
//   grad_h = T_h*(g; a_y, w) + T_h*(g; y, a_w)                  (by neighbour)
// An upstream gradient that is absent (has_* false, a null pointer) contributes nothing. The
// forward and the first backward are the single-term cases: T(h, y, w) is grad_g with a_h = h
// alone; T_y*(g; h, w) and T_w*(g; h, y) are grad_y and grad_w with a_h = h alone; T_h*(g; y, w)
// is grad_h with a_y = y alone.
struct Upstream {
  bool has_h, has_y, has_w;
};

template <typename scalar_t>
void convolution_sum_kernel(const scalar_t* h, const scalar_t* y, const scalar_t* w, const scalar_t* a_h,
                                   const scalar_t* a_y, const scalar_t* a_w, Upstream up, const int64_t* neighbour,
                                   const int64_t* by_centre, const int64_t* centre_ptr, int64_t n_nodes,
                                   const int64_t* paths, int64_t n_paths, const int64_t* terms, const scalar_t* coefs,
                                   const int64_t* path_terms, int64_t node_dim, int64_t edge_dim, int64_t weight_dim,
                                   int64_t out_dim, scalar_t* grad_g) {
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < n_nodes; ++i) {
    scalar_t* out_row = grad_g + i * out_dim;
    std::fill(out_row, out_row + out_dim, scalar_t(0));
    for (int64_t q = centre_ptr[i]; q < centre_ptr[i + 1]; ++q) {
      const int64_t e = by_centre[q];
      const scalar_t* h_row = h + neighbour[e] * node_dim;
      const scalar_t* ah_row = up.has_h ? a_h + neighbour[e] * node_dim : nullptr;
      const scalar_t* y_row = y + e * edge_dim;
      const scalar_t* ay_row = up.has_y ? a_y + e * edge_dim : nullptr;
      const scalar_t* w_row = w + e * weight_dim;
      const scalar_t* aw_row = up.has_w ? a_w + e * weight_dim : nullptr;
      for (int64_t p = 0; p < n_paths; ++p) {
        const int64_t mul = paths[6 * p], node_start = paths[6 * p + 1], w_off = paths[6 * p + 3], out_start = paths[6 * p + 4];
        const scalar_t* wp = w_row + w_off;
        const scalar_t* awp = up.has_w ? aw_row + w_off : nullptr;
        for (int64_t t = path_terms[p]; t < path_terms[p + 1]; ++t) {
          const int64_t k = terms[3 * t], a = terms[3 * t + 1], j = terms[3 * t + 2];
          const scalar_t sy = coefs[t] * y_row[j];
          const scalar_t* hp = h_row + node_start + a * mul;
          scalar_t* op = out_row + out_start + k * mul;
          if (up.has_h) {
            const scalar_t* ahp = ah_row + node_start + a * mul;
#pragma omp simd
            for (int64_t c = 0; c < mul; ++c) op[c] += sy * wp[c] * ahp[c];
          }
          if (up.has_y) {
            const scalar_t say = coefs[t] * ay_row[j];
#pragma omp simd
            for (int64_t c = 0; c < mul; ++c) op[c] += say * wp[c] * hp[c];
          }
          if (up.has_w) {
#pragma omp simd
            for (int64_t c = 0; c < mul; ++c) op[c] += sy * awp[c] * hp[c];
          }
        }
      }
    }
  }
}

template <typename scalar_t>
void edge_transpose_sum_kernel(const scalar_t* g, const scalar_t* h, const scalar_t* y, const scalar_t* w,
                                  const scalar_t* a_h, const scalar_t* a_y, const scalar_t* a_w, Upstream up,
                                  const int64_t* centre, const int64_t* neighbour, int64_t n_edges,
                                  const int64_t* paths, int64_t n_paths, const int64_t* terms, const scalar_t* coefs,
                                  const int64_t* path_terms, int64_t node_dim, int64_t edge_dim, int64_t weight_dim,
                                  int64_t out_dim, scalar_t* grad_y, scalar_t* grad_w, bool need_y, bool need_w) {
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < n_edges; ++e) {
    const scalar_t* g_row = g + centre[e] * out_dim;
    const scalar_t* h_row = h + neighbour[e] * node_dim;
    const scalar_t* ah_row = up.has_h ? a_h + neighbour[e] * node_dim : nullptr;
    const scalar_t* y_row = y + e * edge_dim;
    const scalar_t* ay_row = up.has_y ? a_y + e * edge_dim : nullptr;
    const scalar_t* w_row = w + e * weight_dim;
    const scalar_t* aw_row = up.has_w ? a_w + e * weight_dim : nullptr;
    if (need_w) std::fill(grad_w + e * weight_dim, grad_w + (e + 1) * weight_dim, scalar_t(0));
    if (need_y) std::fill(grad_y + e * edge_dim, grad_y + (e + 1) * edge_dim, scalar_t(0));
    for (int64_t p = 0; p < n_paths; ++p) {
      const int64_t mul = paths[6 * p], node_start = paths[6 * p + 1], w_off = paths[6 * p + 3], out_start = paths[6 * p + 4];
      const scalar_t* wp = w_row + w_off;
      const scalar_t* awp = up.has_w ? aw_row + w_off : nullptr;
      for (int64_t t = path_terms[p]; t < path_terms[p + 1]; ++t) {
        const int64_t k = terms[3 * t], a = terms[3 * t + 1], j = terms[3 * t + 2];
        const scalar_t* hp = h_row + node_start + a * mul;
        const scalar_t* ahp = up.has_h ? ah_row + node_start + a * mul : nullptr;
        const scalar_t* gp = g_row + out_start + k * mul;
        if (need_w) {  // T_w*(g; a_h, y) + T_w*(g; h, a_y)
          scalar_t* gw = grad_w + e * weight_dim + w_off;
          if (up.has_h) {
            const scalar_t sy = coefs[t] * y_row[j];
#pragma omp simd
            for (int64_t c = 0; c < mul; ++c) gw[c] += sy * ahp[c] * gp[c];
          }
          if (up.has_y) {
            const scalar_t say = coefs[t] * ay_row[j];
#pragma omp simd
            for (int64_t c = 0; c < mul; ++c) gw[c] += say * hp[c] * gp[c];
          }
        }
        if (need_y) {  // T_y*(g; a_h, w) + T_y*(g; h, a_w)
          scalar_t acc = 0;
          if (up.has_h) {
#pragma omp simd reduction(+ : acc)
            for (int64_t c = 0; c < mul; ++c) acc += wp[c] * ahp[c] * gp[c];
          }
          if (up.has_w) {
#pragma omp simd reduction(+ : acc)
            for (int64_t c = 0; c < mul; ++c) acc += awp[c] * hp[c] * gp[c];
          }
          grad_y[e * edge_dim + j] += coefs[t] * acc;
        }
      }
    }
  }
}

template <typename scalar_t>
void node_transpose_sum_kernel(const scalar_t* g, const scalar_t* y, const scalar_t* w, const scalar_t* a_y,
                                  const scalar_t* a_w, Upstream up, const int64_t* centre, const int64_t* by_neighbour,
                                  const int64_t* neighbour_ptr, int64_t n_nodes, const int64_t* paths, int64_t n_paths,
                                  const int64_t* terms, const scalar_t* coefs, const int64_t* path_terms,
                                  int64_t node_dim, int64_t edge_dim, int64_t weight_dim, int64_t out_dim,
                                  scalar_t* grad_h) {
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t n = 0; n < n_nodes; ++n) {
    scalar_t* gh_row = grad_h + n * node_dim;
    std::fill(gh_row, gh_row + node_dim, scalar_t(0));
    for (int64_t q = neighbour_ptr[n]; q < neighbour_ptr[n + 1]; ++q) {
      const int64_t e = by_neighbour[q];
      const scalar_t* g_row = g + centre[e] * out_dim;
      const scalar_t* y_row = y + e * edge_dim;
      const scalar_t* ay_row = up.has_y ? a_y + e * edge_dim : nullptr;
      const scalar_t* w_row = w + e * weight_dim;
      const scalar_t* aw_row = up.has_w ? a_w + e * weight_dim : nullptr;
      for (int64_t p = 0; p < n_paths; ++p) {
        const int64_t mul = paths[6 * p], node_start = paths[6 * p + 1], w_off = paths[6 * p + 3], out_start = paths[6 * p + 4];
        const scalar_t* wp = w_row + w_off;
        const scalar_t* awp = up.has_w ? aw_row + w_off : nullptr;
        for (int64_t t = path_terms[p]; t < path_terms[p + 1]; ++t) {
          const int64_t k = terms[3 * t], a = terms[3 * t + 1], j = terms[3 * t + 2];
          const scalar_t* gp = g_row + out_start + k * mul;
          scalar_t* ghp = gh_row + node_start + a * mul;
          if (up.has_y) {  // T_h*(g; a_y, w)
            const scalar_t say = coefs[t] * ay_row[j];
#pragma omp simd
            for (int64_t c = 0; c < mul; ++c) ghp[c] += say * wp[c] * gp[c];
          }
          if (up.has_w) {  // T_h*(g; y, a_w)
            const scalar_t sy = coefs[t] * y_row[j];
#pragma omp simd
            for (int64_t c = 0; c < mul; ++c) ghp[c] += sy * awp[c] * gp[c];
          }
        }
      }
    }
  }
}

}  // namespace

torch::Tensor fused_forward(torch::Tensor h, torch::Tensor y, torch::Tensor w, torch::Tensor neighbour,
                            torch::Tensor by_centre, torch::Tensor centre_ptr, torch::Tensor paths,
                            torch::Tensor terms, torch::Tensor coefs, torch::Tensor path_terms, int64_t out_dim) {
  const int64_t n_nodes = h.size(0);
  auto out = torch::empty({n_nodes, out_dim}, h.options());  // each row zeroed by its thread
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "fused_forward", [&] {
    const scalar_t* hp = h.data_ptr<scalar_t>();
    convolution_sum_kernel<scalar_t>(hp, y.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), hp, nullptr, nullptr,
                                            Upstream{true, false, false}, neighbour.data_ptr<int64_t>(),
                                            by_centre.data_ptr<int64_t>(), centre_ptr.data_ptr<int64_t>(), n_nodes,
                                            paths.data_ptr<int64_t>(), paths.size(0), terms.data_ptr<int64_t>(),
                                            coefs.data_ptr<scalar_t>(), path_terms.data_ptr<int64_t>(), h.size(1), y.size(1),
                                            w.size(1), out_dim, out.data_ptr<scalar_t>());
  });
  return out;
}

std::vector<torch::Tensor> fused_backward(torch::Tensor grad, torch::Tensor h, torch::Tensor y, torch::Tensor w,
                                          torch::Tensor centre, torch::Tensor neighbour, torch::Tensor by_neighbour,
                                          torch::Tensor neighbour_ptr, torch::Tensor paths, torch::Tensor terms,
                                          torch::Tensor coefs, torch::Tensor path_terms, bool need_h, bool need_y,
                                          bool need_w) {
  // uninitialised: the kernels zero each row they own before accumulating into it; a gradient
  // that is not needed is an empty tensor (the caller returns None for it)
  auto grad_h = need_h ? torch::empty_like(h) : torch::empty({0}, h.options());
  auto grad_y = need_y ? torch::empty_like(y) : torch::empty({0}, y.options());
  auto grad_w = need_w ? torch::empty_like(w) : torch::empty({0}, w.options());
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "fused_backward", [&] {
    const scalar_t* hp = h.data_ptr<scalar_t>();
    const scalar_t* yp = y.data_ptr<scalar_t>();
    if (need_y || need_w)
      edge_transpose_sum_kernel<scalar_t>(grad.data_ptr<scalar_t>(), hp, yp, w.data_ptr<scalar_t>(), hp, nullptr, nullptr,
                                             Upstream{true, false, false}, centre.data_ptr<int64_t>(),
                                             neighbour.data_ptr<int64_t>(), y.size(0), paths.data_ptr<int64_t>(),
                                             paths.size(0), terms.data_ptr<int64_t>(), coefs.data_ptr<scalar_t>(),
                                             path_terms.data_ptr<int64_t>(), h.size(1), y.size(1), w.size(1), grad.size(1),
                                             need_y ? grad_y.data_ptr<scalar_t>() : nullptr,
                                             need_w ? grad_w.data_ptr<scalar_t>() : nullptr, need_y, need_w);
    if (need_h)
      node_transpose_sum_kernel<scalar_t>(grad.data_ptr<scalar_t>(), yp, w.data_ptr<scalar_t>(), yp, nullptr,
                                             Upstream{false, true, false}, centre.data_ptr<int64_t>(),
                                             by_neighbour.data_ptr<int64_t>(), neighbour_ptr.data_ptr<int64_t>(), h.size(0),
                                             paths.data_ptr<int64_t>(), paths.size(0), terms.data_ptr<int64_t>(),
                                             coefs.data_ptr<scalar_t>(), path_terms.data_ptr<int64_t>(), h.size(1), y.size(1),
                                             w.size(1), grad.size(1), grad_h.data_ptr<scalar_t>());
  });
  return {grad_h, grad_y, grad_w};
}

std::vector<torch::Tensor> fused_double_backward(torch::Tensor g, torch::Tensor h, torch::Tensor y, torch::Tensor w,
                                                 torch::Tensor a_h, torch::Tensor a_y, torch::Tensor a_w, bool has_h,
                                                 bool has_y, bool has_w, torch::Tensor centre, torch::Tensor neighbour,
                                                 torch::Tensor by_centre, torch::Tensor centre_ptr,
                                                 torch::Tensor by_neighbour, torch::Tensor neighbour_ptr,
                                                 torch::Tensor paths, torch::Tensor terms, torch::Tensor coefs,
                                                 torch::Tensor path_terms) {
  // (grad_g, grad_h, grad_y, grad_w); a derivative no upstream gradient reaches is an empty
  // tensor (the caller returns None for it)
  const Upstream up{has_h, has_y, has_w};
  const bool need_g = has_h || has_y || has_w, need_h = has_y || has_w, need_y = has_h || has_w, need_w = has_h || has_y;
  auto grad_g = need_g ? torch::empty_like(g) : torch::empty({0}, g.options());
  auto grad_h = need_h ? torch::empty_like(h) : torch::empty({0}, h.options());
  auto grad_y = need_y ? torch::empty_like(y) : torch::empty({0}, y.options());
  auto grad_w = need_w ? torch::empty_like(w) : torch::empty({0}, w.options());
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "fused_double_backward", [&] {
    const scalar_t* ah = has_h ? a_h.data_ptr<scalar_t>() : nullptr;
    const scalar_t* ay = has_y ? a_y.data_ptr<scalar_t>() : nullptr;
    const scalar_t* aw = has_w ? a_w.data_ptr<scalar_t>() : nullptr;
    if (need_g)
      convolution_sum_kernel<scalar_t>(h.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), ah, ay,
                                              aw, up, neighbour.data_ptr<int64_t>(), by_centre.data_ptr<int64_t>(),
                                              centre_ptr.data_ptr<int64_t>(), h.size(0), paths.data_ptr<int64_t>(),
                                              paths.size(0), terms.data_ptr<int64_t>(), coefs.data_ptr<scalar_t>(),
                                              path_terms.data_ptr<int64_t>(), h.size(1), y.size(1), w.size(1), g.size(1),
                                              grad_g.data_ptr<scalar_t>());
    if (need_y || need_w)
      edge_transpose_sum_kernel<scalar_t>(g.data_ptr<scalar_t>(), h.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
                                             w.data_ptr<scalar_t>(), ah, ay, aw, up, centre.data_ptr<int64_t>(),
                                             neighbour.data_ptr<int64_t>(), y.size(0), paths.data_ptr<int64_t>(),
                                             paths.size(0), terms.data_ptr<int64_t>(), coefs.data_ptr<scalar_t>(),
                                             path_terms.data_ptr<int64_t>(), h.size(1), y.size(1), w.size(1), g.size(1),
                                             need_y ? grad_y.data_ptr<scalar_t>() : nullptr,
                                             need_w ? grad_w.data_ptr<scalar_t>() : nullptr, need_y, need_w);
    if (need_h)
      node_transpose_sum_kernel<scalar_t>(g.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), ay, aw,
                                             up, centre.data_ptr<int64_t>(), by_neighbour.data_ptr<int64_t>(),
                                             neighbour_ptr.data_ptr<int64_t>(), h.size(0), paths.data_ptr<int64_t>(),
                                             paths.size(0), terms.data_ptr<int64_t>(), coefs.data_ptr<scalar_t>(),
                                             path_terms.data_ptr<int64_t>(), h.size(1), y.size(1), w.size(1), g.size(1),
                                             grad_h.data_ptr<scalar_t>());
  });
  return {grad_g, grad_h, grad_y, grad_w};
}

void register_fused_convolution(pybind11::module& m) {
  m.def("fused_forward", &fused_forward, "fused convolution forward (CPU)");
  m.def("fused_backward", &fused_backward, "fused convolution backward (CPU)");
  m.def("fused_double_backward", &fused_double_backward, "fused convolution double backward (CPU)");
}
