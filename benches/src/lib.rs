//! Criterion benchmarks of the kameleon hot paths live in `benches/benches/`.
