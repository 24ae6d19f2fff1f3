// The GGUF reader against malformed input: crafted byte strings, one defect each, and real
// models cut short at many points. Every one must be refused with a lumen::Error that names the
// file and the key or tensor at fault; none may crash or read out of bounds (each parse gets an
// exact-size heap copy so AddressSanitizer sees any over-read).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_support.h"

namespace lumen {
namespace {

constexpr const char* kName = "crafted.gguf";

// Little-endian GGUF bytes, built field by field (v2/v3 layout unless `wide` is off: v1).
class Raw {
 public:
  explicit Raw(bool wide = true) : wide_(wide) {}
  std::vector<uint8_t> bytes;

  template <class T>
  Raw& put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
    return *this;
  }
  Raw& u8(uint8_t v) { return put(v); }
  Raw& u32(uint32_t v) { return put(v); }
  Raw& u64(uint64_t v) { return put(v); }
  Raw& size(uint64_t v) { return wide_ ? u64(v) : u32(static_cast<uint32_t>(v)); }
  Raw& raw(std::string_view s) {
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  Raw& str(std::string_view s) { return size(s.size()).raw(s); }
  Raw& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return raw("GGUF").u32(version).size(n_tensors).size(n_kv);
  }
  Raw& header(uint64_t n_tensors, uint64_t n_kv) { return header(3, n_tensors, n_kv); }
  Raw& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  Raw& kv_str(std::string_view key, std::string_view v) { return str(key).u32(8).str(v); }
  Raw& tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) size(n);
    return u32(type).u64(offset);
  }
  Raw& pad(size_t alignment) {
    while (bytes.size() % alignment) bytes.push_back(0);
    return *this;
  }
  Raw& zeros(size_t n) {
    bytes.resize(bytes.size() + n);
    return *this;
  }

 private:
  bool wide_;
};

// Parses an exact-size heap copy of the first `n` bytes and touches what a loader touches (every
// value, both ends of every tensor), so that ASan reports any pointer past the copy.
void parse_copy(const uint8_t* data, size_t n, const std::string& name) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[n == 0 ? 1 : n]);
  if (n) std::memcpy(copy.get(), data, n);
  auto f = GgufFile::parse(copy.get(), n, name);
  size_t sum = 0;
  for (const auto& [k, v] : f->metadata()) sum += v.to_string().size();
  for (const GgufTensorInfo& t : f->tensors()) sum += t.data[0] + t.data[t.n_bytes - 1];
  EXPECT_GT(sum + 1, 0u);
}

std::string refusal(const std::vector<uint8_t>& bytes) {
  try {
    parse_copy(bytes.data(), bytes.size(), kName);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Expects `bytes` to be refused with a one-line message naming the file and every part.
void expect_refused(const std::vector<uint8_t>& bytes, const std::vector<std::string>& parts) {
  const std::string msg = refusal(bytes);
  ASSERT_FALSE(msg.empty()) << "accepted; expected a refusal mentioning '" << parts.at(0) << "'";
  EXPECT_EQ(msg.rfind(kName, 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << msg << "' lacks '" << p << "'";
}

void expect_accepted(const std::vector<uint8_t>& bytes) {
  try {
    parse_copy(bytes.data(), bytes.size(), kName);
  } catch (const Error& e) {
    ADD_FAILURE() << "refused: " << e.what();
  }
}

// A good file to start from: two keys, two F32 tensors of 4 elements at offsets 0 and 32.
Raw good() {
  Raw r;
  r.header(2, 2).kv_str("general.architecture", "llama").kv_u32("llama.block_count", 1);
  r.tensor("a", {4}, 0, 0).tensor("b", {4}, 0, 32).pad(32).zeros(48);
  return r;
}

TEST(GgufMalformed, BaselineIsGood) {
  expect_accepted(good().bytes);
  Raw r;
  expect_accepted(r.header(0, 0).bytes);  // no metadata, no tensors
}

TEST(GgufMalformed, BadMagic) {
  expect_refused({}, {"bad magic"});
  expect_refused({'G', 'G', 'U'}, {"bad magic"});
  std::vector<uint8_t> b = good().bytes;
  b[3] = 'X';
  expect_refused(b, {"bad magic"});
  b[0] = 'g', b[1] = 'g', b[2] = 'j', b[3] = 't';
  expect_refused(b, {"GGML"});
  b = {'G', 'G', 'U', 'F', 3, 0};  // magic, then cut inside the version
  expect_refused(b, {"truncated", "version"});
}

TEST(GgufMalformed, Versions) {
  Raw r0, r4, r99;
  expect_refused(r0.header(0, 0, 0).bytes, {"version 0"});
  expect_refused(r4.header(4, 0, 0).bytes, {"version 4"});
  expect_refused(r99.header(0xffffffffu, 0, 0).bytes, {"version 4294967295"});
  // A big-endian v3 file: the version reads as 0x03000000.
  Raw be;
  be.raw("GGUF").u32(0x03000000u).u64(0).u64(0);
  expect_refused(be.bytes, {"big-endian"});
}

TEST(GgufMalformed, ImpossibleCounts) {
  for (uint64_t n : {uint64_t{1} << 62, ~uint64_t{0}, uint64_t{1000}}) {
    Raw kv, t;
    expect_refused(kv.header(0, n).kv_u32("a", 1).bytes, {"metadata count", std::to_string(n)});
    expect_refused(t.header(n, 0).zeros(64).bytes, {"tensor count", std::to_string(n)});
  }
  Raw v1(false);  // v1 counts are 32-bit
  expect_refused(v1.header(1, 0, 0xffffffffu).bytes, {"metadata count"});
}

TEST(GgufMalformed, StringLengths) {
  Raw key;
  expect_refused(key.header(0, 1).u64(1000).raw("abc").zeros(32).bytes, {"metadata entry 0", "1000", "past the end"});
  Raw huge;
  expect_refused(huge.header(0, 1).u64(~uint64_t{0}).zeros(32).bytes, {"metadata entry 0", "past the end"});
  Raw val;
  expect_refused(val.header(0, 1).str("general.name").u32(8).u64(uint64_t{1} << 40).raw("x").bytes,
                 {"general.name", "string length", "past the end"});
  Raw item;
  item.header(0, 1).str("tokenizer.ggml.tokens").u32(9).u32(8).u64(2).str("ok").u64(50).raw("short");
  expect_refused(item.bytes, {"tokenizer.ggml.tokens", "string length 50"});
  Raw name;
  expect_refused(name.header(1, 0).u64(99).raw("w").zeros(32).bytes, {"name of tensor 0", "past the end"});
  Raw empty_key;
  expect_refused(empty_key.header(0, 1).str("").u32(4).u32(0).bytes, {"metadata entry 0", "empty"});
  Raw nul_key;
  expect_refused(nul_key.header(0, 1).str(std::string_view("a\0b", 3)).u32(4).u32(0).bytes, {"invalid key"});
  Raw empty_tensor;
  expect_refused(empty_tensor.header(1, 0).tensor("", {4}, 0, 0).pad(32).zeros(16).bytes, {"tensor 0", "empty"});
}

TEST(GgufMalformed, HugeArrayCounts) {
  for (uint32_t elem : {0u, 4u, 8u, 9u, 12u}) {  // u8, u32, string, array, f64
    for (uint64_t n : {uint64_t{1} << 61, ~uint64_t{0}, uint64_t{9}}) {
      Raw r;
      r.header(0, 1).str("tokenizer.ggml.scores").u32(9).u32(elem).u64(n).zeros(8);
      expect_refused(r.bytes, {"tokenizer.ggml.scores"});
    }
  }
  Raw ok;  // exactly as many u8 as there are bytes left is fine
  expect_accepted(ok.header(0, 1).str("k").u32(9).u32(0).u64(8).zeros(8).bytes);
}

TEST(GgufMalformed, InvalidTypeIds) {
  for (uint32_t t : {13u, 99u, 0xffffffffu}) {
    Raw value, elem;
    expect_refused(value.header(0, 1).str("general.weird").u32(t).u32(0).bytes,
                   {"general.weird", "invalid value type id " + std::to_string(t)});
    expect_refused(elem.header(0, 1).str("general.arr").u32(9).u32(t).u64(1).u32(0).bytes,
                   {"general.arr", "invalid value type id " + std::to_string(t)});
  }
  Raw inner;  // the element type of a nested array is checked too
  inner.header(0, 1).str("general.nest").u32(9).u32(9).u64(1).u32(77).u64(0);
  expect_refused(inner.bytes, {"general.nest", "77"});
}

TEST(GgufMalformed, NestingDepth) {
  auto nested = [](int levels) {  // `levels` arrays inside each other, innermost holding one u8
    Raw r;
    r.header(0, 1).str("general.deep").u32(9);
    for (int i = 1; i < levels; i++) r.u32(9).u64(1);
    r.u32(0).u64(1).u8(5);
    return r.bytes;
  };
  expect_accepted(nested(8));
  expect_refused(nested(9), {"general.deep", "nested"});
  expect_refused(nested(100000), {"general.deep", "nested"});  // no deep recursion either
}

TEST(GgufMalformed, BoolNotZeroOrOne) {
  Raw scalar, arr;
  expect_refused(scalar.header(0, 1).str("tokenizer.ggml.add_bos_token").u32(7).u8(2).bytes,
                 {"tokenizer.ggml.add_bos_token", "bool", "2"});
  expect_refused(arr.header(0, 1).str("flags").u32(9).u32(7).u64(3).u8(1).u8(0).u8(255).bytes, {"flags", "255"});
}

TEST(GgufMalformed, DuplicateKeyAndTensor) {
  Raw k;
  expect_refused(k.header(0, 2).kv_u32("llama.block_count", 1).kv_u32("llama.block_count", 2).bytes,
                 {"duplicate metadata key 'llama.block_count'"});
  Raw t;
  t.header(2, 0).tensor("w", {4}, 0, 0).tensor("w", {4}, 0, 32).pad(32).zeros(64);
  expect_refused(t.bytes, {"duplicate tensor name 'w'"});
}

TEST(GgufMalformed, Dimensions) {
  Raw d0, d5, zero, neg, big;
  expect_refused(d0.header(1, 0).tensor("t0", {}, 0, 0).pad(32).zeros(32).bytes, {"'t0'", "0 dimensions"});
  expect_refused(d5.header(1, 0).tensor("t5", {1, 1, 1, 1, 1}, 0, 0).pad(32).zeros(32).bytes, {"'t5'", "5 dimensions"});
  expect_refused(zero.header(1, 0).tensor("tz", {4, 0}, 0, 0).pad(32).zeros(32).bytes, {"'tz'", "dimension 1 is 0"});
  expect_refused(neg.header(1, 0).tensor("tn", {~uint64_t{0}}, 0, 0).pad(32).zeros(32).bytes, {"'tn'", "dimension 0"});
  expect_refused(big.header(1, 0).tensor("tb", {(uint64_t{1} << 40) + 1}, 0, 0).pad(32).zeros(32).bytes, {"'tb'", "dimension 0"});
  const uint64_t m = uint64_t{1} << 40;
  Raw prod, bytes;
  expect_refused(prod.header(1, 0).tensor("tp", {m, m, m, m}, 0, 0).pad(32).zeros(32).bytes, {"'tp'", "overflow"});
  // 2^62 F32 elements fit an int64 but their 2^64 bytes do not fit a u64.
  expect_refused(bytes.header(1, 0).tensor("tq", {m, uint64_t{1} << 22}, 0, 0).pad(32).zeros(32).bytes, {"'tq'", "overflow"});
  Raw huge;  // a plausible shape whose bytes the file does not have
  expect_refused(huge.header(1, 0).tensor("th", {m, 1024}, 0, 0).pad(32).zeros(32).bytes, {"'th'", "past the end"});
}

TEST(GgufMalformed, TensorTypes) {
  for (uint32_t t : {4u, 5u, 31u, 1000u, 0xffffffffu}) {
    Raw r;
    expect_refused(r.header(1, 0).tensor("blk.0.attn_q.weight", {32}, t, 0).pad(32).zeros(64).bytes,
                   {"'blk.0.attn_q.weight'", "unknown tensor type id " + std::to_string(t)});
  }
  Raw q8;  // Q8_0 rows of 33
  expect_refused(q8.header(1, 0).tensor("w", {33, 2}, 8, 0).pad(32).zeros(128).bytes,
                 {"'w'", "row length 33", "Q8_0", "block size 32"});
  Raw qk;
  expect_refused(qk.header(1, 0).tensor("k", {128}, 12, 0).pad(32).zeros(256).bytes, {"'k'", "row length 128", "256"});
}

TEST(GgufMalformed, Offsets) {
  Raw unaligned;
  expect_refused(unaligned.header(1, 0).tensor("u", {4}, 0, 4).pad(32).zeros(64).bytes,
                 {"'u'", "offset 4", "alignment 32"});
  Raw past;
  expect_refused(past.header(1, 0).tensor("p", {4}, 0, 32).pad(32).zeros(40).bytes, {"'p'", "past the end"});
  Raw far;
  expect_refused(far.header(1, 0).tensor("f", {4}, 0, ~uint64_t{31}).pad(32).zeros(64).bytes, {"'f'", "past the end"});
  Raw nodata;  // tensor infos, then nothing: the data section would start past the end
  expect_refused(nodata.header(1, 0).tensor("n", {4}, 0, 0).bytes, {"truncated"});
  Raw overlap;
  overlap.header(3, 0).tensor("x", {16}, 0, 0).tensor("y", {8}, 0, 32).tensor("z", {8}, 0, 96).pad(32).zeros(128);
  expect_refused(overlap.bytes, {"'x'", "'y'", "overlap"});
  Raw same;
  same.header(2, 0).tensor("s1", {8}, 0, 0).tensor("s2", {8}, 0, 0).pad(32).zeros(64);
  expect_refused(same.bytes, {"overlap"});
  Raw unordered;  // out-of-order but disjoint tensors are fine
  expect_accepted(unordered.header(2, 0).tensor("hi", {8}, 0, 32).tensor("lo", {8}, 0, 0).pad(32).zeros(64).bytes);
}

TEST(GgufMalformed, Alignment) {
  auto with_alignment = [](auto&& put_value) {
    Raw r;
    r.header(1, 1).str("general.alignment");
    put_value(r);
    r.tensor("t", {4}, 0, 0).pad(64).zeros(64);
    return r.bytes;
  };
  for (uint32_t a : {0u, 3u, 24u, 1u << 21, 0x80000000u})
    expect_refused(with_alignment([&](Raw& r) { r.u32(4).u32(a); }), {"general.alignment", std::to_string(a)});
  expect_refused(with_alignment([](Raw& r) { r.u32(5).u32(static_cast<uint32_t>(-32)); }), {"general.alignment", "-32"});
  expect_refused(with_alignment([](Raw& r) { r.u32(6).put(32.0f); }), {"general.alignment", "float32"});
  expect_refused(with_alignment([](Raw& r) { r.u32(8).str("32"); }), {"general.alignment", "string"});
  expect_refused(with_alignment([](Raw& r) { r.u32(7).u8(1); }), {"general.alignment", "bool"});
  for (uint32_t a : {1u, 8u, 64u}) expect_accepted(with_alignment([&](Raw& r) { r.u32(4).u32(a); }));
  expect_accepted(with_alignment([](Raw& r) { r.u32(10).u64(16); }));  // any unsigned integer type
  // With alignment 64 a tensor at offset 32 is misaligned.
  Raw r;
  r.header(1, 1).kv_u32("general.alignment", 64).tensor("m", {4}, 0, 32).pad(64).zeros(128);
  expect_refused(r.bytes, {"'m'", "alignment 64"});
}

TEST(GgufMalformed, HostileNamesStayOnOneShortLine) {
  const std::string nl_key = "evil\nkey\r\x1b[2J";
  Raw dup;
  dup.header(0, 2).kv_u32(nl_key, 1).kv_u32(nl_key, 1);
  const std::string msg = refusal(dup.bytes);
  EXPECT_NE(msg.find("evil\\x0akey"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\x1b'), std::string::npos) << msg;
  const std::string long_name(100000, 'n');
  Raw t;
  t.header(1, 0).tensor(long_name, {4}, 4, 0).pad(32).zeros(32);
  const std::string msg2 = refusal(t.bytes);
  EXPECT_NE(msg2.find("100000 bytes"), std::string::npos) << msg2.substr(0, 300);
  EXPECT_LT(msg2.size(), 400u);
}

TEST(GgufMalformed, Version1And2Layouts) {
  // v1: 32-bit counts, string lengths, array counts and dimensions; 64-bit offsets.
  Raw v1(false);
  v1.header(1, 1, 2).kv_str("general.architecture", "llama").str("arr").u32(9).u32(8).u32(2).str("a").str("bc");
  v1.tensor("w", {8, 2}, 1, 0).pad(32).zeros(32);
  auto f = GgufFile::parse(v1.bytes.data(), v1.bytes.size(), kName);
  EXPECT_EQ(f->version(), 1u);
  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_array("arr")->at(1).str, "bc");
  ASSERT_NE(f->find_tensor("w"), nullptr);
  EXPECT_EQ(f->find_tensor("w")->n_bytes, 32u);
  Raw v1_str(false);  // a v1 string length is 4 bytes: 0xffffffff cannot be read as 8
  v1_str.header(1, 0, 1).u32(0xffffffffu).zeros(16);
  expect_refused(v1_str.bytes, {"metadata entry 0", "4294967295", "past the end"});
  Raw v2;
  v2.header(2, 1, 1).kv_str("general.architecture", "llama").tensor("w", {4}, 0, 0).pad(32).zeros(16);
  expect_accepted(v2.bytes);
}

// A writer-made file round-trips; every single-byte change to its header either parses or is
// refused with an Error (no crash, no over-read).
TEST(GgufMalformed, HeaderByteMutations) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("llama.block_count", 2);
  w.set_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "a", "bc"});
  w.set_float32s("tokenizer.ggml.scores", {0, 0, -1, -2});
  w.add("nested", gguf_array(GgufType::ARRAY, {gguf_array(GgufType::BOOL, {gguf_bool(true)})}));
  w.add_tensor("token_embd.weight", GgmlType::Q8_0, {32, 4}, std::vector<uint8_t>(4 * 34, 1));
  w.add_tensor("output_norm.weight", GgmlType::F32, {32}, std::vector<uint8_t>(128, 2));
  const std::vector<uint8_t> bytes = w.to_bytes();
  const size_t header = w.header_size();
  std::mt19937 rng(7);
  int refused = 0, accepted = 0;
  for (size_t pos = 0; pos < header; pos++) {
    for (int k = 0; k < 3; k++) {
      std::vector<uint8_t> b = bytes;
      const uint8_t values[] = {0x00, 0xff, static_cast<uint8_t>(rng())};
      b[pos] = values[k];
      try {
        parse_copy(b.data(), b.size(), kName);
        accepted++;
      } catch (const Error& e) {
        refused++;
        EXPECT_EQ(std::string(e.what()).rfind(kName, 0), 0u) << e.what();
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(accepted, 0);
}

// ---- real models, cut short ----

struct ModelFile {
  std::string rel;
  std::vector<uint8_t> bytes;
  size_t data_offset = 0;
  size_t content_end = 0;  // end of the last tensor's bytes: cutting anywhere before it must fail
};

ModelFile load_model(const std::string& rel) {
  ModelFile m;
  m.rel = rel;
  const std::string s = test::read_file(test::shared_path(rel));
  m.bytes.assign(s.begin(), s.end());
  auto f = GgufFile::parse(m.bytes.data(), m.bytes.size(), rel);
  m.data_offset = f->data_offset();
  m.content_end = m.data_offset;
  for (const GgufTensorInfo& t : f->tensors())
    m.content_end = std::max<size_t>(m.content_end, f->data_offset() + t.offset + t.n_bytes);
  return m;
}

std::vector<size_t> cut_points(const ModelFile& m, uint32_t seed, int n_points) {
  std::set<size_t> cuts = {0, 1, 3, 4, 7, 8, 12, 16, 23, 24, 31,  // magic, version, counts, first key
                           m.data_offset - 1, m.data_offset, m.data_offset + 1, m.content_end - 1};
  std::mt19937_64 rng(seed);
  const int n_random = std::max(0, n_points - static_cast<int>(cuts.size()));
  for (int i = 0; i < n_random; i++) {
    // Half inside the header (keys, vocabulary, tensor infos), half inside the tensor data.
    const bool in_header = i % 2 == 0;
    const size_t lo = in_header ? 0 : m.data_offset;
    const size_t hi = in_header ? m.data_offset : m.content_end;
    cuts.insert(lo + rng() % (hi - lo));
  }
  return {cuts.begin(), cuts.end()};
}

TEST(GgufMalformed, TruncatedRealModelsAreRefused) {
  const std::vector<std::string> files = {
      "models/stories260K.gguf", "models/stories260K-q8_0.gguf",
      "models/tinystories260K-h192-saltyduckegg.gguf", "models/zh-tang-poem-750K.gguf",
      "models/llama-2-tiny-random.gguf", "models/legacy/tinyllamas-stories-260k-f32.gguf",
      "models/quant/small256-Q4_K_M-mix.gguf", "models/quant/small256-Q2_K.gguf",
      "models/quant/small256-IQ4_NL.gguf", "models/quant/small256-BF16.gguf"};
  const bool sanitized = std::getenv("LUMEN_SANITIZED") != nullptr;
  const int n_points = sanitized ? 24 : 40;
  int n_files = 0, n_cuts = 0;
  for (size_t fi = 0; fi < files.size(); fi++) {
    const std::string& rel = files[fi];
    if (!test::shared_exists(rel)) {
      ADD_FAILURE() << "shared model missing: " << test::shared_path(rel);
      continue;
    }
    SCOPED_TRACE(rel);
    const ModelFile m = load_model(rel);
    ASSERT_LT(m.data_offset, m.content_end);
    n_files++;
    for (size_t cut : cut_points(m, 1000 + static_cast<uint32_t>(fi), n_points)) {
      n_cuts++;
      try {
        parse_copy(m.bytes.data(), cut, rel);
        ADD_FAILURE() << "a copy cut to " << cut << " of " << m.bytes.size() << " bytes was accepted";
      } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(msg.rfind(rel, 0), 0u) << msg;
        if (cut >= 4 && cut < m.data_offset) {
          EXPECT_TRUE(msg.find("truncated") != std::string::npos || msg.find("past the end") != std::string::npos ||
                      msg.find("impossible") != std::string::npos || msg.find("cannot fit") != std::string::npos)
              << "cut at " << cut << ": " << msg;
        }
        if (cut >= m.data_offset) {
          EXPECT_NE(msg.find("past the end"), std::string::npos) << msg;
        }
      }
    }
  }
  EXPECT_EQ(n_files, static_cast<int>(files.size()));
  EXPECT_GE(n_cuts, n_files * (n_points - 4));
}

TEST(GgufMalformed, LegacyVersion1FileLoads) {
  const std::string rel = "models/legacy/tinyllamas-stories-260k-f32.gguf";
  if (!test::shared_exists(rel)) GTEST_SKIP() << "shared model missing: " << rel;
  auto f = GgufFile::open(test::shared_path(rel));
  EXPECT_EQ(f->version(), 1u);
  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->require_int("llama.block_count"), 5);
  EXPECT_EQ(f->get_array("tokenizer.ggml.tokens")->size(), 512u);
  ASSERT_EQ(f->tensors().size(), 48u);
  const GgufTensorInfo* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape_string(), "[64, 512]");
  EXPECT_EQ(emb->type, GgmlType::F32);
  // It holds stories260K's weights.
  if (test::shared_exists("models/stories260K.gguf")) {
    auto v3 = GgufFile::open(test::shared_path("models/stories260K.gguf"));
    for (const GgufTensorInfo& t : f->tensors()) {
      const GgufTensorInfo* u = v3->find_tensor(t.name);
      ASSERT_NE(u, nullptr) << t.name;
      ASSERT_EQ(t.n_bytes, u->n_bytes) << t.name;
      EXPECT_EQ(std::memcmp(t.data, u->data, t.n_bytes), 0) << t.name;
    }
  }
}

TEST(GgufMalformed, LegacyQ8_0WithRowsOf172IsRefused) {
  const std::string rel = "models/legacy/tinyllamas-stories-260k-q8_0.gguf";
  if (!test::shared_exists(rel)) GTEST_SKIP() << "shared model missing: " << rel;
  const std::string path = test::shared_path(rel);
  try {
    GgufFile::open(path);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path, 0), 0u) << msg;
    EXPECT_NE(msg.find("row length 172"), std::string::npos) << msg;
    EXPECT_NE(msg.find("block size 32"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ffn_down"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace lumen
