// Python bindings of the CPU kernels: each source registers its own functions.
#include <torch/extension.h>

void register_fused_convolution(pybind11::module& m);      // fused_convolution.cpp
void register_symmetric_contraction(pybind11::module& m);  // symmetric_contraction.cpp

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  register_fused_convolution(m);
  register_symmetric_contraction(m);
}
