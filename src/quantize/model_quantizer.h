// Quantizing a whole GGUF model (`lumen quantize`): choose each tensor's output type (one type
// everywhere, or llama.cpp's Q4_K_M / Q5_K_M mixes), then convert the tensors row block by row
// block on a thread pool and stream them into a GgufWriter, so a multi-GB model is never held in
// memory twice. Weights are quantized with weight_quantizer() (byte-identical to llama-quantize
// without an importance matrix); input weights of any type lumen can read are dequantized first.
//
// Which tensors are quantized: 2-D (or more) tensors whose name ends in "weight", except norms
// and a few small tables llama.cpp also leaves alone (ffn_gate_inp, pos_embd, token_types).
// 1-D tensors (norms, biases) are written as F32; other tensors are copied unchanged.
//
// Fallbacks, when the row length is not a multiple of the chosen type's block size: a K-quant
// falls back as llama.cpp does (Q2_K/Q3_K -> IQ4_NL, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0);
// if that (or a legacy 32-block type) still does not fit, the tensor keeps its source type when
// that is F32/F16/BF16 (lossless), else it becomes F16. Each fallback is reported in the plan.
//
// The mixes follow llama.cpp's llama_tensor_get_type for Q4_K_M (Q5_K_M alike, one step up):
//   - output.weight -> Q6_K (Q8_0 if its rows are not a multiple of 256); when the model has no
//     output.weight (tied embeddings), token_embd.weight plays that role and gets Q6_K too;
//   - attn_v.weight and ffn_down.weight of layer i of n -> Q6_K when use_more_bits(i, n):
//     i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2;
//   - fused attn_qkv.weight -> Q5_K (Q6_K for Q5_K_M);
//   - everything else -> Q4_K (Q5_K).
// A tensor whose chosen type equals its source type is copied as is (no requantization).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace lumen {

class GgufFile;
struct GgufTensorInfo;

// A TYPE argument of `lumen quantize`.
struct QuantTarget {
  std::string name;        // as the user spells it canonically: "Q4_K_M", "Q8_0", ...
  GgmlType base;           // the type most weights get
  bool mix = false;        // llama.cpp's "_M" mix rules on top of `base`
  uint32_t file_type = 0;  // general.file_type (llama.cpp's llama_ftype number)
};

// Case-insensitive; nullopt for an unknown name.
std::optional<QuantTarget> parse_quant_target(std::string_view name);
// Every accepted TYPE, in a sensible order for help and error messages.
std::vector<std::string> quant_target_names();

// llama.cpp's use_more_bits(i_layer, n_layers).
bool use_more_bits(int64_t i_layer, int64_t n_layers);

struct TensorPlan {
  size_t index = 0;          // position in the input file
  std::string name;
  GgmlType src_type = GgmlType::F32;
  GgmlType dst_type = GgmlType::F32;
  bool copy = false;         // bytes copied verbatim (same type, or not a weight)
  std::string note;          // why the type differs from the target's rule (a fallback); "" if not
};

// The type of every tensor of `f`, in file order. Throws Error naming the tensor when a tensor
// that must be converted has a type lumen cannot read.
std::vector<TensorPlan> plan_quantization(const GgufFile& f, const QuantTarget& target);

struct QuantizeProgress {
  size_t index = 0;      // 0-based position of the tensor
  size_t n_tensors = 0;
  const TensorPlan* plan = nullptr;
  const GgufTensorInfo* tensor = nullptr;
  size_t in_bytes = 0;   // this tensor, source
  size_t out_bytes = 0;  // this tensor, written
  bool done = false;     // false: starting this tensor; true: finished it
};

struct QuantizeOptions {
  int n_threads = 0;  // 0: all hardware threads
  std::function<void(const QuantizeProgress&)> on_progress;  // called on the calling thread
};

struct QuantizeStats {
  size_t n_tensors = 0;
  size_t n_quantized = 0;  // tensors converted (not copied)
  size_t n_fallback = 0;   // tensors given a fallback type
  size_t in_bytes = 0;     // tensor data, input
  size_t out_bytes = 0;    // tensor data, output
  double seconds = 0;
};

// Converts `in` to `out_path` (written atomically: nothing is left at out_path, nor a
// temporary file, on failure). Metadata is copied, with general.file_type and
// general.quantization_version (2) set.
QuantizeStats quantize_model(const GgufFile& in, const std::vector<TensorPlan>& plan,
                             const QuantTarget& target, const std::string& out_path,
                             const QuantizeOptions& options = {});

}  // namespace lumen
