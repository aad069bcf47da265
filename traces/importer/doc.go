// Package importer builds moe-traces from routing that users dump from
// their own model runs: per-layer topk_idx tensors (and optional
// topk_weights) in NumPy .npy and .npz files, safetensors files and CSV.
//
// The tensor readers are small and self-contained: .npy is read from its
// documented header (magic, version, a Python dict literal with descr,
// fortran_order and shape), .npz is a zip of .npy members (stored or
// deflated), safetensors is an 8-byte little-endian header length, a JSON
// header and the raw little-endian data. Every error names the file, the
// tensor (or CSV line) and the element.
package importer
