"""Lowering passes: derive the mechanical detail of a schedule (layout, barriers, phases)."""
