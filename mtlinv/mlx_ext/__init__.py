"""The sources of mtlinv._mlx_ext, mtlinv's ops as MLX Primitives, and their build (build.py)."""
