"""Lowering: derive the mechanical detail of a schedule (layout, barriers, phases, fragment
layouts, ABI) into a `LoweredKernel`, and print it as text or as CUDA C++ (docs/lowering.md)."""
