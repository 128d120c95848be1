"""Compile emitted kernels (NVRTC or nvcc) and, where a GPU exists, run them."""
