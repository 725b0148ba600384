// Symmetric contraction (MACE product basis) on CPU (OpenMP), as a sparse polynomial per
// channel: output component K of atom n, channel c is
//   B[n, K, c] = sum_t [K_t == K] F[z_n, t, c] * m_t(A[n, :, c]),
// where each term t is one structurally non-zero (output component, monomial) pair of the
// couplings and m_t = a[x0] * a[x1] * a[x2] is a monomial of degree 1 to 3 in the channel's
// atomic basis. Lower degrees point their missing factors at a constant row of ones (index D),
// so every term has three factors and one code path serves all orders.
//
// Layouts (all contiguous):
//   a      [n_atoms, D, C]     atomic basis, component-major (ir_mul), channels innermost
//   f      [S, T, C]           per species, term and channel: the species weights folded into
//                              the couplings (computed in torch, differentiable there)
//   terms  [T, 4] int64        (K, x0, x1, x2), factors in [0, D]; D is the constant row of ones
//   out    [n_atoms, D_out, C]
//
// One kernel computes every pass, by which inputs it is given (absent ones are null):
//   out_g += m_coef * m           + f * D_u m                 (forward: m_coef = f)
//   out_f += g * (u ? D_u m : m)                              (summed over the atoms of a species)
//   out_a += q_coef * g * dm/da   + g * f * d(D_u m)/da       (backward: q_coef = f)
// with D_u m = sum_p u[x_p] * prod_{p' != p} a[x_p'] the derivative of m along u. The first
// backward (forces) is (out_a, out_f) with q_coef = f; its derivative for upstream gradients
// (u_a, u_f) of (out_a, out_f) is out_g with (m_coef = u_f, u = u_a), out_f with u = u_a, and
// out_a with (q_coef = u_f, u = u_a).
#include <algorithm>
#include <omp.h>
#include <torch/extension.h>
#include <vector>

namespace {

template <typename scalar_t>
void contraction_kernel(const scalar_t* a, const scalar_t* f, const int64_t* species, const int64_t* terms,
                        int64_t n_atoms, int64_t dim, int64_t dim_out, int64_t n_terms, int64_t n_species,
                        int64_t channels, const scalar_t* g, const scalar_t* u, const scalar_t* m_coef,
                        const scalar_t* q_coef, scalar_t* out_g, scalar_t* out_a, scalar_t* out_f) {
  const int64_t C = channels;
  const int64_t row = dim * C, row_ext = (dim + 1) * C, f_size = n_species * n_terms * C;
  // out_f sums over atoms: each thread sums its (static) share of the atoms into a slot of its
  // own, and the slots are added in thread order after the loop, so the result is the same in
  // every run with the same thread count (a resumed training run matches an uninterrupted one)
  const int max_threads = omp_get_max_threads();
  std::vector<scalar_t> f_partial(out_f ? static_cast<size_t>(max_threads) * f_size : 0, scalar_t(0));
  int used_threads = 1;
#pragma omp parallel
  {
#pragma omp single
    used_threads = omp_get_num_threads();
    scalar_t* f_local = out_f ? f_partial.data() + static_cast<size_t>(omp_get_thread_num()) * f_size : nullptr;
    std::vector<scalar_t> a_ext(row_ext), u_ext(u ? row_ext : 0), ga_ext(out_a ? row_ext : 0);
    std::fill(a_ext.begin() + row, a_ext.end(), scalar_t(1));  // the constant factor of lower degrees
    if (u) std::fill(u_ext.begin() + row, u_ext.end(), scalar_t(0));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < n_atoms; ++n) {
      const int64_t z = species[n];
      std::copy(a + n * row, a + (n + 1) * row, a_ext.begin());
      if (u) std::copy(u + n * row, u + (n + 1) * row, u_ext.begin());
      if (out_a) std::fill(ga_ext.begin(), ga_ext.end(), scalar_t(0));
      scalar_t* og = out_g ? out_g + n * dim_out * C : nullptr;
      if (og) std::fill(og, og + dim_out * C, scalar_t(0));
      const scalar_t* g_row = g ? g + n * dim_out * C : nullptr;
      for (int64_t t = 0; t < n_terms; ++t) {
        const int64_t K = terms[4 * t];
        const scalar_t* a0 = a_ext.data() + terms[4 * t + 1] * C;
        const scalar_t* a1 = a_ext.data() + terms[4 * t + 2] * C;
        const scalar_t* a2 = a_ext.data() + terms[4 * t + 3] * C;
        const scalar_t* ft = f + (z * n_terms + t) * C;
        const scalar_t* u0 = u ? u_ext.data() + terms[4 * t + 1] * C : nullptr;
        const scalar_t* u1 = u ? u_ext.data() + terms[4 * t + 2] * C : nullptr;
        const scalar_t* u2 = u ? u_ext.data() + terms[4 * t + 3] * C : nullptr;
        const scalar_t* gk = g_row ? g_row + K * C : nullptr;
        // out_g and out_f each recompute m (or D_u m) in their own loop: keeping one copy per
        // term in a buffer measured slower (an extra store and load per channel; 2026-12-02)
        if (og) {
          scalar_t* ok = og + K * C;
          if (m_coef) {
            const scalar_t* mt = m_coef + (z * n_terms + t) * C;
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) ok[c] += mt[c] * a0[c] * a1[c] * a2[c];
          }
          if (u) {
#pragma omp simd
            for (int64_t c = 0; c < C; ++c)
              ok[c] += ft[c] * (u0[c] * a1[c] * a2[c] + a0[c] * u1[c] * a2[c] + a0[c] * a1[c] * u2[c]);
          }
        }
        if (out_f) {
          scalar_t* fl = f_local + (z * n_terms + t) * C;
          if (u) {
#pragma omp simd
            for (int64_t c = 0; c < C; ++c)
              fl[c] += gk[c] * (u0[c] * a1[c] * a2[c] + a0[c] * u1[c] * a2[c] + a0[c] * a1[c] * u2[c]);
          } else {
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) fl[c] += gk[c] * a0[c] * a1[c] * a2[c];
          }
        }
        if (out_a) {
          // one factor position at a time: repeated factors (a[i]^2) then add up correctly
          scalar_t* d0 = ga_ext.data() + terms[4 * t + 1] * C;
          scalar_t* d1 = ga_ext.data() + terms[4 * t + 2] * C;
          scalar_t* d2 = ga_ext.data() + terms[4 * t + 3] * C;
          if (q_coef) {
            const scalar_t* qt = q_coef + (z * n_terms + t) * C;
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) {
              const scalar_t s = qt[c] * gk[c];
              d0[c] += s * a1[c] * a2[c];
              d1[c] += s * a0[c] * a2[c];
              d2[c] += s * a0[c] * a1[c];
            }
          }
          if (u) {
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) {
              const scalar_t s = ft[c] * gk[c];
              d0[c] += s * (u1[c] * a2[c] + a1[c] * u2[c]);
              d1[c] += s * (u0[c] * a2[c] + a0[c] * u2[c]);
              d2[c] += s * (u0[c] * a1[c] + a0[c] * u1[c]);
            }
          }
        }
      }
      if (out_a) std::copy(ga_ext.begin(), ga_ext.begin() + row, out_a + n * row);  // the ones row is dropped
    }
  }
  if (out_f) {
    std::fill(out_f, out_f + f_size, scalar_t(0));
    for (int thread = 0; thread < used_threads; ++thread) {
      const scalar_t* partial = f_partial.data() + static_cast<size_t>(thread) * f_size;
      for (int64_t i = 0; i < f_size; ++i) out_f[i] += partial[i];
    }
  }
}

template <typename scalar_t>
const scalar_t* optional_data(const torch::Tensor& t) {
  return t.numel() > 0 ? t.data_ptr<scalar_t>() : nullptr;
}

void check_inputs(const torch::Tensor& a, const torch::Tensor& f, const torch::Tensor& species, const torch::Tensor& terms) {
  TORCH_CHECK(a.dim() == 3 && a.is_contiguous(), "a must be a contiguous [n_atoms, D, C] tensor");
  TORCH_CHECK(f.dim() == 3 && f.is_contiguous() && f.size(2) == a.size(2), "f must be a contiguous [S, T, C] tensor");
  TORCH_CHECK(f.scalar_type() == a.scalar_type(), "a and f must have one dtype");
  TORCH_CHECK(terms.dim() == 2 && terms.size(1) == 4 && terms.size(0) == f.size(1), "terms must be [T, 4] with T = f.size(1)");
  TORCH_CHECK(species.numel() == a.size(0) && species.is_contiguous() && species.scalar_type() == torch::kInt64,
              "species must be a contiguous int64 tensor with one entry per atom");
  const int64_t* z = species.data_ptr<int64_t>();
  for (int64_t n = 0; n < species.numel(); ++n)
    TORCH_CHECK(z[n] >= 0 && z[n] < f.size(0), "species index ", z[n], " of atom ", n, " is outside [0, ", f.size(0), ")");
}

}  // namespace

torch::Tensor symmetric_contraction_forward(torch::Tensor a, torch::Tensor f, torch::Tensor species, torch::Tensor terms,
                                            int64_t dim_out) {
  check_inputs(a, f, species, terms);
  auto out = torch::empty({a.size(0), dim_out, a.size(2)}, a.options());
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "symmetric_contraction_forward", [&] {
    contraction_kernel<scalar_t>(a.data_ptr<scalar_t>(), f.data_ptr<scalar_t>(), species.data_ptr<int64_t>(),
                                 terms.data_ptr<int64_t>(), a.size(0), a.size(1), dim_out, f.size(1), f.size(0), a.size(2),
                                 nullptr, nullptr, f.data_ptr<scalar_t>(), nullptr, out.data_ptr<scalar_t>(), nullptr,
                                 nullptr);
  });
  return out;
}

std::vector<torch::Tensor> symmetric_contraction_backward(torch::Tensor g, torch::Tensor a, torch::Tensor f,
                                                          torch::Tensor species, torch::Tensor terms, bool need_a,
                                                          bool need_f) {
  // (grad_a, grad_f); one that is not needed is an empty tensor
  check_inputs(a, f, species, terms);
  auto grad_a = need_a ? torch::empty_like(a) : torch::empty({0}, a.options());
  auto grad_f = need_f ? torch::empty_like(f) : torch::empty({0}, f.options());
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "symmetric_contraction_backward", [&] {
    contraction_kernel<scalar_t>(a.data_ptr<scalar_t>(), f.data_ptr<scalar_t>(), species.data_ptr<int64_t>(),
                                 terms.data_ptr<int64_t>(), a.size(0), a.size(1), g.size(1), f.size(1), f.size(0), a.size(2),
                                 g.data_ptr<scalar_t>(), nullptr, nullptr, f.data_ptr<scalar_t>(), nullptr,
                                 need_a ? grad_a.data_ptr<scalar_t>() : nullptr,
                                 need_f ? grad_f.data_ptr<scalar_t>() : nullptr);
  });
  return {grad_a, grad_f};
}

std::vector<torch::Tensor> symmetric_contraction_double_backward(torch::Tensor g, torch::Tensor a, torch::Tensor f,
                                                                 torch::Tensor species, torch::Tensor terms,
                                                                 torch::Tensor u_a, torch::Tensor u_f) {
  // (grad_g, grad_a, grad_f) of the backward's (grad_a, grad_f) for upstream gradients (u_a,
  // u_f), each empty when absent; grad_f is empty unless u_a is given (grad_f does not depend on f)
  check_inputs(a, f, species, terms);
  const bool has_u = u_a.numel() > 0, has_uf = u_f.numel() > 0;
  auto grad_g = (has_u || has_uf) ? torch::empty_like(g) : torch::empty({0}, g.options());
  auto grad_a = (has_u || has_uf) ? torch::empty_like(a) : torch::empty({0}, a.options());
  auto grad_f = has_u ? torch::empty_like(f) : torch::empty({0}, f.options());
  if (!has_u && !has_uf) return {grad_g, grad_a, grad_f};
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "symmetric_contraction_double_backward", [&] {
    contraction_kernel<scalar_t>(a.data_ptr<scalar_t>(), f.data_ptr<scalar_t>(), species.data_ptr<int64_t>(),
                                 terms.data_ptr<int64_t>(), a.size(0), a.size(1), g.size(1), f.size(1), f.size(0), a.size(2),
                                 g.data_ptr<scalar_t>(), optional_data<scalar_t>(u_a), optional_data<scalar_t>(u_f),
                                 optional_data<scalar_t>(u_f), grad_g.data_ptr<scalar_t>(), grad_a.data_ptr<scalar_t>(),
                                 has_u ? grad_f.data_ptr<scalar_t>() : nullptr);
  });
  return {grad_g, grad_a, grad_f};
}

void register_symmetric_contraction(pybind11::module& m) {
  m.def("symmetric_contraction_forward", &symmetric_contraction_forward, "symmetric contraction forward (CPU)");
  m.def("symmetric_contraction_backward", &symmetric_contraction_backward, "symmetric contraction backward (CPU)");
  m.def("symmetric_contraction_double_backward", &symmetric_contraction_double_backward,
        "symmetric contraction double backward (CPU)");
}
