//! warpforge's host runtime on cudarc; this branch carries its TMA tensor-map builder.

pub mod tensor_map;
