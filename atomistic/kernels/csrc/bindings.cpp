// Python bindings of the CPU kernels (fused_convolution.cpp, symmetric_contraction.cpp).
#include <torch/extension.h>
#include <vector>

torch::Tensor fused_forward(torch::Tensor h, torch::Tensor y, torch::Tensor w, torch::Tensor neighbour,
                            torch::Tensor by_centre, torch::Tensor centre_ptr, torch::Tensor paths,
                            torch::Tensor terms, torch::Tensor coefs, torch::Tensor path_terms, int64_t out_dim);
std::vector<torch::Tensor> fused_backward(torch::Tensor grad, torch::Tensor h, torch::Tensor y, torch::Tensor w,
                                          torch::Tensor centre, torch::Tensor neighbour, torch::Tensor by_neighbour,
                                          torch::Tensor neighbour_ptr, torch::Tensor paths, torch::Tensor terms,
                                          torch::Tensor coefs, torch::Tensor path_terms, bool need_h, bool need_y,
                                          bool need_w);
std::vector<torch::Tensor> fused_double_backward(torch::Tensor g, torch::Tensor h, torch::Tensor y, torch::Tensor w,
                                                 torch::Tensor a_h, torch::Tensor a_y, torch::Tensor a_w, bool has_h,
                                                 bool has_y, bool has_w, torch::Tensor centre, torch::Tensor neighbour,
                                                 torch::Tensor by_centre, torch::Tensor centre_ptr,
                                                 torch::Tensor by_neighbour, torch::Tensor neighbour_ptr,
                                                 torch::Tensor paths, torch::Tensor terms, torch::Tensor coefs,
                                                 torch::Tensor path_terms);
torch::Tensor symmetric_contraction_forward(torch::Tensor a, torch::Tensor f, torch::Tensor species, torch::Tensor terms,
                                            int64_t dim_out);
std::vector<torch::Tensor> symmetric_contraction_backward(torch::Tensor g, torch::Tensor a, torch::Tensor f,
                                                          torch::Tensor species, torch::Tensor terms, bool need_a,
                                                          bool need_f);
std::vector<torch::Tensor> symmetric_contraction_double_backward(torch::Tensor g, torch::Tensor a, torch::Tensor f,
                                                                 torch::Tensor species, torch::Tensor terms,
                                                                 torch::Tensor u_a, torch::Tensor u_f);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("fused_forward", &fused_forward, "fused convolution forward (CPU)");
  m.def("fused_backward", &fused_backward, "fused convolution backward (CPU)");
  m.def("fused_double_backward", &fused_double_backward, "fused convolution double backward (CPU)");
  m.def("symmetric_contraction_forward", &symmetric_contraction_forward, "symmetric contraction forward (CPU)");
  m.def("symmetric_contraction_backward", &symmetric_contraction_backward, "symmetric contraction backward (CPU)");
  m.def("symmetric_contraction_double_backward", &symmetric_contraction_double_backward,
        "symmetric contraction double backward (CPU)");
}
