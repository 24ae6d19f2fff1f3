// Writes a few tiny, valid GGUF files with GgufWriter into the folder given as argv[1]: seeds for
// the GGUF fuzz target (scripts/fuzz.sh). Small seeds keep the fuzzer fast and still show it every
// value type, nested arrays, several tensor types, a non-default alignment and a vocabulary.
// Not a fuzz target itself (tests/fuzz/seeds/ is not globbed by CMake).
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_writer.h"

namespace {

using namespace lumen;

std::vector<uint8_t> bytes_of(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<uint8_t>(seed + i * 37);
  return v;
}

void add_tensors(GgufWriter& w) {
  w.add_tensor("token_embd.weight", GgmlType::Q8_0, {32, 4}, bytes_of(4 * 34, 1));
  w.add_tensor("blk.0.attn_norm.weight", GgmlType::F32, {32}, bytes_of(128, 2));
  w.add_tensor("blk.0.attn_q.weight", GgmlType::F16, {8, 2, 2}, bytes_of(64, 3));
  w.add_tensor("blk.0.ffn_up.weight", GgmlType::Q4_K, {256}, bytes_of(144, 4));
  w.add_tensor("output.weight", GgmlType::BF16, {2, 2, 2, 2}, bytes_of(32, 5));
}

GgufWriter every_type() {
  GgufWriter w;
  w.set_uint8("t.u8", 200);
  w.set_int8("t.i8", -3);
  w.set_uint16("t.u16", 60000);
  w.set_int16("t.i16", -300);
  w.set_uint32("t.u32", 4000000000u);
  w.set_int32("t.i32", -70000);
  w.set_uint64("t.u64", 1ull << 40);
  w.set_int64("t.i64", -(1ll << 40));
  w.set_float32("t.f32", 1e-5f);
  w.set_float64("t.f64", 0.1);
  w.set_bool("t.bool", true);
  w.set_string("t.str", "hello");
  w.set_strings("t.strs", {"a", "", "bc"});
  w.set_int32s("t.i32s", {1, -2, 3});
  w.set_float32s("t.f32s", {0.5f});
  w.add("t.nested", gguf_array(GgufType::ARRAY, {gguf_array(GgufType::BOOL, {gguf_bool(false)}),
                                                 gguf_array(GgufType::UINT64, {gguf_uint64(9)})}));
  add_tensors(w);
  return w;
}

GgufWriter tiny_llama() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "seed");
  w.set_uint32("llama.context_length", 64);
  w.set_uint32("llama.embedding_length", 32);
  w.set_uint32("llama.block_count", 1);
  w.set_uint32("llama.feed_forward_length", 64);
  w.set_uint32("llama.attention.head_count", 4);
  w.set_uint32("llama.attention.head_count_kv", 2);
  w.set_float32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_string("tokenizer.ggml.model", "llama");
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "<0x0A>", "\xe2\x96\x81", "a", "b", "ab"};
  w.set_strings("tokenizer.ggml.tokens", tokens);
  w.set_float32s("tokenizer.ggml.scores", {0, 0, 0, 0, -1, -2, -3, -4});
  w.set_int32s("tokenizer.ggml.token_type", {2, 3, 3, 6, 1, 1, 1, 1});
  w.set_uint32("tokenizer.ggml.bos_token_id", 1);
  w.set_uint32("tokenizer.ggml.eos_token_id", 2);
  add_tensors(w);
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  try {
    every_type().write(dir + "/seed-every-type.gguf");
    tiny_llama().write(dir + "/seed-tiny-llama.gguf");
    GgufWriter aligned = tiny_llama();
    aligned.set_alignment(64);
    aligned.write(dir + "/seed-align64.gguf");
    GgufWriter(/* header only */).write(dir + "/seed-empty.gguf");
  } catch (const Error& e) {
    std::fprintf(stderr, "make_gguf_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
