// Judging `lumen bench`'s measurements against the machine's roofline: how many bytes a decoded
// token must read and how many FLOPs a prefill must do (from the model's shapes and weight
// types), the rates achieved, which ceiling bounds each phase (DRAM bandwidth or compute), a
// one-line verdict per phase, and an SVG roofline chart.
//
// Cost model:
//   decode bytes/token  = weight bytes (every matrix once; the token-embedding table one row
//                         unless it is tied as the output) + KV cache bytes read at the mean
//                         context of the decode phase: 2 (K,V) x n_layer x n_head_kv x head_dim
//                         x bytes per element x positions;
//   decode FLOPs/token  = 2 x matmul parameters + attention 2 x 2 x n_layer x n_head x head_dim x ctx;
//   prefill FLOPs       = 2 x matmul parameters x tokens (the output matrix only for the last
//                         token: logits are computed for it alone) + attention
//                         2 x 2 x n_layer x n_head x head_dim x p x (d + p / 2) after a depth d;
//   prefill bytes       = weight bytes and the depth's KV once per batch of n_batch tokens,
//                         plus the prompt's KV written (for its intensity).
// The compute ceiling of prefill is the int8 (VNNI) peak for weights whose dot products are
// integer (legacy and K-quants, through 8-bit activations), BF16 for BF16 weights and for F16
// computed as BF16 (estimated as 2x FP32 where the CPU has AVX-512 BF16, since the roofline does
// not measure it), FP32 otherwise (F32, and F16 widened for exact FP32 FMAs); the type holding
// most of the matmul bytes decides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace lumen {

class GgufFile;
struct ModelConfig;
struct RooflineMeasurement;

struct TypeShare {
  GgmlType type;
  int64_t n_tensors = 0;
  size_t bytes = 0;
};

struct ModelCost {
  int64_t n_layer = 0, n_head = 0, n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;
  double weight_bytes_per_token = 0;  // weights read per decoded token
  double matmul_params = 0;           // weights multiplied by every token (output excluded)
  double output_params = 0;           // the output (logits) matrix
  double kv_elem_bytes = 4;
  bool tied_output = false;
  std::string compute_kind;           // "int8", "bf16" or "fp32"
  std::vector<TypeShare> type_mix;    // every tensor, by type, most bytes first
  std::string type_mix_string() const;  // "Q8_0 x155 (1.17 GB), F32 x45 (0.18 MB)"
};

// `model_weight_bytes` is Model::weight_bytes() (every matrix except an untied embedding table).
// k_type / v_type: the KV cache's; kv_elem_bytes is their stored bytes per element, K and V
// weighted by their row sizes.
ModelCost model_cost(const GgufFile& f, const ModelConfig& c, size_t model_weight_bytes, GgmlType k_type,
                     GgmlType v_type, bool f16_as_bf16 = false);

struct PhasePoint {
  std::string name;          // "decode" / "prefill"
  double flops = 0;          // per token (decode) or per prompt (prefill)
  double bytes = 0;          // likewise
  double intensity = 0;      // FLOP/byte
  double gflop_s = 0;        // achieved
  double gb_s = 0;           // achieved bytes/s / 1e9
  bool bandwidth_bound = false;  // the roofline at this intensity is the bandwidth slope
  double ceiling = 0;        // the bounding ceiling: GB/s if bandwidth-bound, else GFLOP/s
  double frac = 0;           // achieved / ceiling
  std::string verdict;       // "decode: bandwidth-bound, 81% of 66.2 GB/s"
};

struct Ceiling {
  std::string label;  // "FP32 FMA", "int8 VNNI", "BF16 (est.)"
  double gflop_s = 0;
};

struct RooflineReport {
  double dram_gb_s = 0;
  std::vector<Ceiling> ceilings;  // measured compute ceilings (and the BF16 estimate)
  std::string compute_kind;       // the one prefill is judged against
  double compute_peak = 0;        // its GFLOP/s
  double decode_mean_ctx = 0;
  double decode_kv_bytes_per_token = 0;
  double prefill_attn_flops = 0;
  PhasePoint decode;
  PhasePoint prefill;
};

// What was measured (diagnostics/benchmark.h): a prompt of n_prompt tokens after n_depth
// context tokens, and n_gen decode steps after both.
struct BenchShape {
  int64_t n_prompt = 0;
  int64_t n_gen = 0;
  int64_t n_batch = 512;
  int64_t n_depth = 0;
};

// Roofline analysis of measured speeds; a zero speed (e.g. n_gen 0) gives zero rates.
RooflineReport analyze_roofline(const ModelCost& cost, const BenchShape& shape, double prefill_tok_s,
                                double decode_tok_s, const RooflineMeasurement& machine);

// A standalone SVG document: log-log axes of FLOP/byte vs GFLOP/s with decade ticks, the
// bandwidth slope and each compute ceiling (labelled), both phases as labelled points.
std::string roofline_svg(const RooflineReport& r, const std::string& title, const std::string& subtitle);

// "66.2", "880", "0.35": three significant digits for labels.
std::string format_3sig(double v);

}  // namespace lumen
