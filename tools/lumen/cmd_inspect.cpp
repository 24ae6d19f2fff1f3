// `lumen inspect [--json] FILE.gguf`: what a model file holds, and what it will cost to run.
#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "gguf/gguf_file.h"

namespace lumen::cli {

namespace {

struct Figures {
  std::string arch;
  std::map<std::string, int64_t> hparams;
  std::string tokenizer_model;
  std::string tokenizer_pre;
  int64_t vocab_size = 0;
  std::map<std::string, std::pair<int64_t, uint64_t>> by_type;  // type -> (count, bytes)
  uint64_t total_bytes = 0;
  int64_t n_params = 0;
  int64_t kv_elems_per_token = 0;  // 2 * n_layer * n_head_kv * head_dim
  double kv_q8_bytes_per_token = 0;  // Q8_0 K and V: each head's slice in whole 34-byte blocks
};

Figures gather(const GgufFile& f) {
  Figures x;
  x.arch = std::string(f.get_string("general.architecture").value_or(""));
  const std::string& a = x.arch;
  auto put = [&](const char* name, const std::string& key) {
    if (auto v = f.get_int(key)) x.hparams[name] = *v;
  };
  put("context_length", a + ".context_length");
  put("embedding_length", a + ".embedding_length");
  put("block_count", a + ".block_count");
  put("feed_forward_length", a + ".feed_forward_length");
  put("head_count", a + ".attention.head_count");
  put("head_count_kv", a + ".attention.head_count_kv");
  put("key_length", a + ".attention.key_length");
  put("value_length", a + ".attention.value_length");
  put("rope_dimension_count", a + ".rope.dimension_count");
  x.tokenizer_model = std::string(f.get_string("tokenizer.ggml.model").value_or(""));
  x.tokenizer_pre = std::string(f.get_string("tokenizer.ggml.pre").value_or(""));
  if (auto* toks = f.get_array("tokenizer.ggml.tokens")) x.vocab_size = static_cast<int64_t>(toks->size());
  for (const GgufTensorInfo& t : f.tensors()) {
    auto& e = x.by_type[std::string(type_name(t.type))];
    e.first++;
    e.second += t.n_bytes;
    x.total_bytes += t.n_bytes;
    x.n_params += t.n_elements();
  }
  const auto h = x.hparams;
  if (h.count("block_count") && h.count("head_count")) {
    const int64_t n_head = h.at("head_count");
    const int64_t n_head_kv = h.count("head_count_kv") ? h.at("head_count_kv") : n_head;
    int64_t head_dim_k = 0, head_dim_v = 0;
    if (h.count("key_length")) head_dim_k = h.at("key_length");
    else if (h.count("embedding_length") && n_head > 0) head_dim_k = h.at("embedding_length") / n_head;
    head_dim_v = h.count("value_length") ? h.at("value_length") : head_dim_k;
    // The figures come straight from the file: multiply with overflow checks, and report no KV
    // cost (0) rather than a wrapped or negative one.
    int64_t per_layer = 0, total = 0;
    const int64_t n_layer = h.at("block_count");
    if (n_layer >= 0 && n_head_kv >= 0 && head_dim_k >= 0 && head_dim_v >= 0 &&
        !__builtin_add_overflow(head_dim_k, head_dim_v, &per_layer) &&
        !__builtin_mul_overflow(per_layer, n_head_kv, &per_layer) &&
        !__builtin_mul_overflow(per_layer, n_layer, &total)) {
      x.kv_elems_per_token = total;
      x.kv_q8_bytes_per_token = static_cast<double>(n_layer) * static_cast<double>(n_head_kv) * 34.0 *
                                static_cast<double>((head_dim_k + 31) / 32 + (head_dim_v + 31) / 32);
    }
  }
  return x;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, u++;
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.2f} {}", b, units[u]);
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "show a GGUF file's architecture, hyper-parameters, tokenizer and tensors");
  static std::string path;
  static bool json = false, all_keys = false;
  cmd->add_option("file", path, "GGUF model file")->required();
  cmd->add_flag("--json", json, "print one JSON object");
  cmd->add_flag("--all", all_keys, "list every metadata key and tensor");
  cmd->callback([] {
    auto f = GgufFile::open(path);
    Figures x = gather(*f);
    const int64_t ctx = x.hparams.count("context_length") ? x.hparams.at("context_length") : 0;
    // 8-bit KV: one byte per element plus one f16 scale per 32 elements of a head (Q8_0 blocks,
    // as the engine stores them: kv/kv_storage.h).
    const double f16_per_token = x.kv_elems_per_token * 2.0;
    const double q8_per_token = x.kv_q8_bytes_per_token;
    if (json) {
      nlohmann::json j;
      j["file"] = path;
      j["gguf_version"] = f->version();
      j["file_bytes"] = f->file_size();
      j["alignment"] = f->alignment();
      j["architecture"] = x.arch;
      j["name"] = std::string(f->get_string("general.name").value_or(""));
      j["hparams"] = x.hparams;
      j["tokenizer"] = {{"model", x.tokenizer_model}, {"pre", x.tokenizer_pre}, {"vocab_size", x.vocab_size}};
      nlohmann::json types = nlohmann::json::object();
      for (auto& [t, e] : x.by_type) types[t] = {{"count", e.first}, {"bytes", e.second}};
      j["tensor_types"] = types;
      j["n_tensors"] = f->tensors().size();
      j["n_params"] = x.n_params;
      j["tensor_bytes"] = x.total_bytes;
      j["kv_cache"] = {{"elements_per_token", x.kv_elems_per_token},
                       {"f16_bytes_per_token", f16_per_token},
                       {"q8_bytes_per_token", q8_per_token},
                       {"context_length", ctx},
                       {"f16_bytes_full_context", f16_per_token * ctx},
                       {"q8_bytes_full_context", q8_per_token * ctx}};
      if (all_keys) {
        nlohmann::json md = nlohmann::json::object();
        for (auto& [k, v] : f->metadata()) md[k] = v.to_string();
        j["metadata"] = md;
        nlohmann::json ts = nlohmann::json::array();
        for (auto& t : f->tensors())
          ts.push_back({{"name", t.name}, {"type", type_name(t.type)}, {"shape", std::vector<int64_t>(t.ne, t.ne + t.n_dims)},
                        {"offset", t.offset}, {"bytes", t.n_bytes}});
        j["tensors"] = ts;
      }
      // Metadata strings are arbitrary bytes (and to_string() may cut a UTF-8 sequence): replace
      // invalid UTF-8 rather than let dump() throw.
      fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
      return;
    }
    fmt::print("file:          {} (GGUF v{}, {}, alignment {})\n", path, f->version(), human_bytes(f->file_size()), f->alignment());
    fmt::print("architecture:  {}\n", x.arch.empty() ? "(none)" : x.arch);
    if (auto n = f->get_string("general.name")) fmt::print("name:          {}\n", *n);
    for (auto& [k, v] : x.hparams) fmt::print("  {:<22} {}\n", k, v);
    fmt::print("tokenizer:     {}{} , {} tokens\n", x.tokenizer_model.empty() ? "(none)" : x.tokenizer_model,
               x.tokenizer_pre.empty() ? "" : " (pre: " + x.tokenizer_pre + ")", x.vocab_size);
    fmt::print("tensors:       {} tensors, {} parameters, {}\n", f->tensors().size(), x.n_params, human_bytes(x.total_bytes));
    for (auto& [t, e] : x.by_type) fmt::print("  {:<8} {:>5} tensors  {}\n", t, e.first, human_bytes(e.second));
    if (x.kv_elems_per_token > 0) {
      fmt::print("KV cache:      F16 {} per token, {} for {} tokens\n", human_bytes(f16_per_token), human_bytes(f16_per_token * ctx), ctx);
      fmt::print("               Q8  {} per token, {} for {} tokens\n", human_bytes(q8_per_token), human_bytes(q8_per_token * ctx), ctx);
    }
    if (all_keys) {
      fmt::print("metadata:\n");
      for (auto& [k, v] : f->metadata()) fmt::print("  {} = {}\n", k, v.to_string());
      fmt::print("tensors:\n");
      for (auto& t : f->tensors()) fmt::print("  {:<32} {:<7} {:<20} {}\n", t.name, type_name(t.type), t.shape_string(), human_bytes(t.n_bytes));
    }
  });
}

}  // namespace lumen::cli
