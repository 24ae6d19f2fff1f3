#include "quantize/model_quantizer.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "core/quant/quant_ref.h"
#include "core/thread_pool.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace lumen {

namespace {

// general.file_type numbers are llama.cpp's llama_ftype. A single K-quant everywhere has no
// ftype of its own; the "_S" (small, mostly that type) number is the closest description.
const QuantTarget kTargets[] = {
    {"Q4_K_M", GgmlType::Q4_K, true, 15},  {"Q5_K_M", GgmlType::Q5_K, true, 17},
    {"Q8_0", GgmlType::Q8_0, false, 7},    {"Q4_0", GgmlType::Q4_0, false, 2},
    {"Q4_1", GgmlType::Q4_1, false, 3},    {"Q5_0", GgmlType::Q5_0, false, 8},
    {"Q5_1", GgmlType::Q5_1, false, 9},    {"Q2_K", GgmlType::Q2_K, false, 10},
    {"Q3_K", GgmlType::Q3_K, false, 11},   {"Q4_K", GgmlType::Q4_K, false, 14},
    {"Q5_K", GgmlType::Q5_K, false, 16},   {"Q6_K", GgmlType::Q6_K, false, 18},
    {"IQ4_NL", GgmlType::IQ4_NL, false, 25}, {"F16", GgmlType::F16, false, 1},
    {"BF16", GgmlType::BF16, false, 32},   {"F32", GgmlType::F32, false, 0},
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// The tensors llama-quantize quantizes: matrices named "*weight", minus norms and small tables
// whose precision matters more than their size.
bool is_quantizable(const GgufTensorInfo& t) {
  if (t.n_dims < 2 || !ends_with(t.name, "weight")) return false;
  if (contains(t.name, "_norm.weight") || contains(t.name, "ffn_gate_inp.weight")) return false;
  if (contains(t.name, "pos_embd") || contains(t.name, "token_types")) return false;
  return true;
}

bool is_float_type(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

bool fits(GgmlType t, int64_t row_length) { return row_length % type_traits(t).block_size == 0; }

// llama.cpp's replacement when a K-quant's 256-element block does not divide the rows.
GgmlType k_quant_fallback(GgmlType t) {
  switch (t) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K: return GgmlType::IQ4_NL;
    case GgmlType::Q4_K: return GgmlType::Q5_0;
    case GgmlType::Q5_K: return GgmlType::Q5_1;
    case GgmlType::Q6_K: return GgmlType::Q8_0;
    default: return t;
  }
}

// The mix rule for one quantizable tensor (before the block-size fallback).
GgmlType mix_type(const QuantTarget& target, const GgufTensorInfo& t, bool has_output, int64_t i_attn_v,
                  int64_t n_attn_v, int64_t i_ffn_down, int64_t n_ffn_down) {
  const bool q5 = target.base == GgmlType::Q5_K;
  if (t.name == "output.weight" || (!has_output && t.name == "token_embd.weight"))
    return fits(GgmlType::Q6_K, t.ne[0]) ? GgmlType::Q6_K : GgmlType::Q8_0;
  if (contains(t.name, "attn_v.weight"))
    return use_more_bits(i_attn_v, n_attn_v) ? GgmlType::Q6_K : target.base;
  if (contains(t.name, "ffn_down"))
    return use_more_bits(i_ffn_down, n_ffn_down) ? GgmlType::Q6_K : target.base;
  if (contains(t.name, "attn_qkv.weight")) return q5 ? GgmlType::Q6_K : GgmlType::Q5_K;
  return target.base;
}

}  // namespace

std::optional<QuantTarget> parse_quant_target(std::string_view name) {
  std::string up(name);
  for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const QuantTarget& t : kTargets)
    if (t.name == up) return t;
  return std::nullopt;
}

std::vector<std::string> quant_target_names() {
  std::vector<std::string> out;
  for (const QuantTarget& t : kTargets) out.push_back(t.name);
  return out;
}

bool use_more_bits(int64_t i_layer, int64_t n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

std::vector<TensorPlan> plan_quantization(const GgufFile& f, const QuantTarget& target) {
  const auto& tensors = f.tensors();
  // The counters llama.cpp keeps: attn_v (and fused qkv) and ffn_down tensors, in file order.
  int64_t n_attn_v = 0, n_ffn_down = 0;
  bool has_output = false;
  for (const GgufTensorInfo& t : tensors) {
    if (contains(t.name, "attn_v.weight") || contains(t.name, "attn_qkv.weight")) n_attn_v++;
    if (contains(t.name, "ffn_down")) n_ffn_down++;
    if (t.name == "output.weight") has_output = true;
  }
  int64_t i_attn_v = 0, i_ffn_down = 0;
  std::vector<TensorPlan> plan;
  plan.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); i++) {
    const GgufTensorInfo& t = tensors[i];
    TensorPlan p;
    p.index = i;
    p.name = t.name;
    p.src_type = t.type;
    if (is_quantizable(t)) {
      GgmlType want = target.mix ? mix_type(target, t, has_output, i_attn_v, n_attn_v, i_ffn_down, n_ffn_down)
                                 : target.base;
      GgmlType got = want;
      if (!fits(got, t.ne[0])) got = k_quant_fallback(got);
      if (!fits(got, t.ne[0])) got = is_float_type(t.type) ? t.type : GgmlType::F16;
      if (got != want)
        p.note = fmt::format("row length {} is not a multiple of {}'s block of {}: written as {}", t.ne[0],
                             type_name(want), type_traits(want).block_size, type_name(got));
      p.dst_type = got;
    } else if (t.n_dims == 1) {
      p.dst_type = GgmlType::F32;  // norms and biases: lumen computes them in F32
    } else {
      p.dst_type = t.type;
    }
    if (contains(t.name, "attn_v.weight") || contains(t.name, "attn_qkv.weight")) i_attn_v++;
    if (contains(t.name, "ffn_down")) i_ffn_down++;
    p.copy = p.dst_type == p.src_type;
    if (!p.copy) {
      if (type_traits(t.type).to_float == nullptr)
        fail("{}: tensor '{}': lumen cannot read type {} to convert it to {}", f.path(), t.name, type_name(t.type),
             type_name(p.dst_type));
      if (weight_quantizer(p.dst_type) == nullptr)
        fail("{}: tensor '{}': lumen cannot write type {}", f.path(), t.name, type_name(p.dst_type));
    }
    plan.push_back(std::move(p));
  }
  return plan;
}

QuantizeStats quantize_model(const GgufFile& in, const std::vector<TensorPlan>& plan, const QuantTarget& target,
                             const std::string& out_path, const QuantizeOptions& options) {
  const auto& tensors = in.tensors();
  if (plan.size() != tensors.size()) fail("internal error: a quantization plan for another file");
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(out_path, ec)) fail("{}: is a directory", out_path);

  const auto t0 = std::chrono::steady_clock::now();
  int n_threads = options.n_threads;
  if (n_threads <= 0) n_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  ThreadPool pool(n_threads);
  std::vector<std::vector<float>> scratch(static_cast<size_t>(n_threads));

  QuantizeStats stats;
  stats.n_tensors = tensors.size();
  GgufWriter w;
  w.copy_metadata_from(in);
  w.set_uint32("general.quantization_version", 2);
  w.set_uint32("general.file_type", target.file_type);

  for (size_t i = 0; i < tensors.size(); i++) {
    const GgufTensorInfo& t = tensors[i];
    const TensorPlan& p = plan[i];
    if (p.name != t.name) fail("internal error: plan entry {} names '{}', the file '{}'", i, p.name, t.name);
    const size_t out_bytes = row_size(p.dst_type, t.ne[0]) * static_cast<size_t>(t.n_rows());
    stats.in_bytes += t.n_bytes;
    stats.out_bytes += out_bytes;
    if (!p.copy) stats.n_quantized++;
    if (!p.note.empty()) stats.n_fallback++;

    auto producer = [&, i, out_bytes](GgufTensorSink& sink) {
      QuantizeProgress pr;
      pr.index = i;
      pr.n_tensors = tensors.size();
      pr.plan = &plan[i];
      pr.tensor = &tensors[i];
      pr.in_bytes = tensors[i].n_bytes;
      pr.out_bytes = out_bytes;
      if (options.on_progress) options.on_progress(pr);
      const GgufTensorInfo& src = tensors[i];
      const TensorPlan& tp = plan[i];
      if (tp.copy) {
        sink.write(src.data, src.n_bytes);
      } else {
        const int64_t n_cols = src.ne[0];
        const int64_t n_rows = src.n_rows();
        const size_t in_row = row_size(src.type, n_cols);
        const size_t out_row = row_size(tp.dst_type, n_cols);
        const ToFloatFn to_float = type_traits(src.type).to_float;
        const FromFloatFn quantize = weight_quantizer(tp.dst_type);
        // Row blocks of about 16 MB of output: bounded memory whatever the model's size.
        const int64_t chunk_rows = std::max<int64_t>(1, static_cast<int64_t>((size_t{16} << 20) / out_row));
        std::vector<uint8_t> out(static_cast<size_t>(std::min(chunk_rows, n_rows)) * out_row);
        for (auto& s : scratch) s.resize(static_cast<size_t>(n_cols));
        for (int64_t r0 = 0; r0 < n_rows; r0 += chunk_rows) {
          const int64_t nr = std::min(chunk_rows, n_rows - r0);
          const int64_t grain = std::max<int64_t>(1, nr / (8 * static_cast<int64_t>(n_threads)));
          pool.parallel_for(nr, grain, [&](int64_t b, int64_t e, int ti) {
            float* x = scratch[static_cast<size_t>(ti)].data();
            for (int64_t r = b; r < e; r++) {
              to_float(src.data + static_cast<size_t>(r0 + r) * in_row, x, n_cols);
              quantize(x, out.data() + static_cast<size_t>(r) * out_row, n_cols);
            }
          });
          sink.write(out.data(), static_cast<size_t>(nr) * out_row);
        }
      }
      pr.done = true;
      if (options.on_progress) options.on_progress(pr);
    };
    w.add_tensor_streamed(t.name, p.dst_type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), producer);
  }
  w.write(out_path);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace lumen
