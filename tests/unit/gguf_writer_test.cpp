// GgufWriter: every value type and tensor layout written is read back identically by GgufFile;
// the writer refuses what the reader would refuse; writes are atomic.
#include "gguf/gguf_writer.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "test_support.h"

namespace lumen {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tpl = (fs::temp_directory_path() / "lumen_gguf_writer_XXXXXX").string();
    if (mkdtemp(tpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// The parsed file views `bytes`: keep them alive (a temporary would dangle, hence the delete).
std::unique_ptr<GgufFile> parse_bytes(const std::vector<uint8_t>& bytes) {
  return GgufFile::parse(bytes.data(), bytes.size(), "roundtrip.gguf");
}
std::unique_ptr<GgufFile> parse_bytes(std::vector<uint8_t>&&) = delete;

// Recursive equality of two values, reporting where they differ.
void expect_same(const GgufValue& a, const GgufValue& b, const std::string& where) {
  ASSERT_EQ(a.type, b.type) << where;
  switch (a.type) {
    case GgufType::FLOAT32:
      EXPECT_EQ(static_cast<float>(a.real), static_cast<float>(b.real)) << where;
      EXPECT_EQ(std::signbit(a.real), std::signbit(b.real)) << where;
      break;
    case GgufType::FLOAT64:
      EXPECT_EQ(a.real, b.real) << where;
      EXPECT_EQ(std::signbit(a.real), std::signbit(b.real)) << where;
      break;
    case GgufType::STRING:
      EXPECT_EQ(a.str, b.str) << where;
      break;
    case GgufType::ARRAY:
      ASSERT_EQ(a.elem_type, b.elem_type) << where;
      ASSERT_EQ(a.items.size(), b.items.size()) << where;
      for (size_t i = 0; i < a.items.size(); i++)
        expect_same(a.items[i], b.items[i], where + "[" + std::to_string(i) + "]");
      break;
    default:
      EXPECT_EQ(a.bits, b.bits) << where;
  }
}

GgufValue nested(int levels) {  // `levels` arrays inside each other around one int32
  GgufValue v = gguf_array(GgufType::INT32, {gguf_int32(7)});
  for (int i = 1; i < levels; i++) v = gguf_array(GgufType::ARRAY, {v});
  return v;
}

// Every value type, with edge values.
std::vector<std::pair<std::string, GgufValue>> all_values() {
  static const std::string kBinary("a\0b\xff\n", 5);  // strings are byte strings, NULs included
  std::vector<std::pair<std::string, GgufValue>> kv = {
      {"u8.min", gguf_uint8(0)},
      {"u8.max", gguf_uint8(255)},
      {"i8.min", gguf_int8(-128)},
      {"i8.max", gguf_int8(127)},
      {"u16.max", gguf_uint16(65535)},
      {"i16.min", gguf_int16(-32768)},
      {"u32.max", gguf_uint32(0xffffffffu)},
      {"i32.min", gguf_int32(std::numeric_limits<int32_t>::min())},
      {"u64.max", gguf_uint64(std::numeric_limits<uint64_t>::max())},
      {"i64.min", gguf_int64(std::numeric_limits<int64_t>::min())},
      {"f32", gguf_float32(1.0e-5f)},
      {"f32.neg_zero", gguf_float32(-0.0f)},
      {"f32.inf", gguf_float32(std::numeric_limits<float>::infinity())},
      {"f32.denormal", gguf_float32(std::numeric_limits<float>::denorm_min())},
      {"f64", gguf_float64(0.1)},
      {"f64.max", gguf_float64(std::numeric_limits<double>::max())},
      {"bool.true", gguf_bool(true)},
      {"bool.false", gguf_bool(false)},
      {"str", gguf_string("Once upon a time")},
      {"str.empty", gguf_string("")},
      {"str.utf8", gguf_string("春风 \xF0\x9F\x98\x80")},
      {"str.binary", gguf_string(kBinary)},
      {"arr.u8", gguf_array(GgufType::UINT8, {gguf_uint8(1), gguf_uint8(255)})},
      {"arr.i8", gguf_array(GgufType::INT8, {gguf_int8(-1), gguf_int8(5)})},
      {"arr.u16", gguf_array(GgufType::UINT16, {gguf_uint16(65535)})},
      {"arr.i16", gguf_array(GgufType::INT16, {gguf_int16(-300), gguf_int16(300)})},
      {"arr.u32", gguf_array(GgufType::UINT32, {gguf_uint32(1), gguf_uint32(2), gguf_uint32(3)})},
      {"arr.i32", gguf_array(GgufType::INT32, {gguf_int32(-7)})},
      {"arr.u64", gguf_array(GgufType::UINT64, {gguf_uint64(uint64_t{1} << 63)})},
      {"arr.i64", gguf_array(GgufType::INT64, {gguf_int64(-(int64_t{1} << 40))})},
      {"arr.f32", gguf_array(GgufType::FLOAT32, {gguf_float32(-1.5f), gguf_float32(3e38f)})},
      {"arr.f64", gguf_array(GgufType::FLOAT64, {gguf_float64(1e-300)})},
      {"arr.bool", gguf_array(GgufType::BOOL, {gguf_bool(true), gguf_bool(false)})},
      {"arr.str", gguf_array(GgufType::STRING, {gguf_string("<s>"), gguf_string(""),
                                                gguf_string("\xe2\x96\x81the"), gguf_string(kBinary)})},
      {"arr.empty", gguf_array(GgufType::FLOAT32, {})},
      {"arr.empty_str", gguf_array(GgufType::STRING, {})},
      // Inner arrays each have their own element type.
      {"arr.nested", gguf_array(GgufType::ARRAY,
                                {gguf_array(GgufType::INT32, {gguf_int32(1), gguf_int32(2)}),
                                 gguf_array(GgufType::STRING, {gguf_string("x")}),
                                 gguf_array(GgufType::ARRAY, {gguf_array(GgufType::BOOL, {gguf_bool(true)})}),
                                 gguf_array(GgufType::UINT8, {})})},
      {"arr.deepest", nested(8)},  // the deepest nesting the reader accepts
  };
  return kv;
}

TEST(GgufWriter, EveryValueTypeRoundTrips) {
  GgufWriter w;
  const auto kv = all_values();
  for (const auto& [k, v] : kv) w.add(k, v);
  const std::vector<uint8_t> bytes = w.to_bytes();
  EXPECT_EQ(bytes.size(), w.file_size());
  auto f = parse_bytes(bytes);
  EXPECT_EQ(f->version(), 3u);
  ASSERT_EQ(f->metadata().size(), kv.size());
  for (size_t i = 0; i < kv.size(); i++) {
    EXPECT_EQ(f->metadata()[i].first, kv[i].first);  // file order is insertion order
    expect_same(kv[i].second, f->metadata()[i].second, kv[i].first);
  }
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(*f->get_int("i64.min"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->get_array("arr.str")->at(2).str, "\xe2\x96\x81the");
}

TEST(GgufWriter, ConvenienceSetters) {
  GgufWriter w;
  w.set_uint8("a", 1);
  w.set_int8("b", -2);
  w.set_uint16("c", 3);
  w.set_int16("d", -4);
  w.set_uint32("e", 5);
  w.set_int32("f", -6);
  w.set_uint64("g", 7);
  w.set_int64("h", -8);
  w.set_float32("i", 0.5f);
  w.set_float64("j", 0.25);
  w.set_bool("k", true);
  w.set_string("l", "text");
  w.set_strings("m", {"one", "two", ""});
  w.set_int32s("n", {1, -1});
  w.set_float32s("o", {1.25f});
  const std::vector<uint8_t> bytes = w.to_bytes();  // the parsed file views these bytes
  auto f = parse_bytes(bytes);
  const char* types[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
                         "float32", "float64", "bool", "string", "array", "array", "array"};
  ASSERT_EQ(f->metadata().size(), 15u);
  for (size_t i = 0; i < 15; i++) EXPECT_STREQ(gguf_type_name(f->metadata()[i].second.type), types[i]);
  EXPECT_EQ(*f->get_int("b"), -2);
  EXPECT_EQ(*f->get_int("h"), -8);
  EXPECT_EQ(*f->get_float("i"), 0.5);
  EXPECT_EQ(*f->get_bool("k"), true);
  EXPECT_EQ(*f->get_string("l"), "text");
  ASSERT_EQ(f->get_array("m")->size(), 3u);
  EXPECT_EQ(f->get_array("m")->at(1).str, "two");
  EXPECT_EQ(f->get_array("n")->at(1).as_int("n"), -1);
  EXPECT_EQ(f->get_array("o")->at(0).as_float("o"), 1.25);
}

TEST(GgufWriter, AddReplacesInPlaceAndRemove) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("llama.block_count", 5);
  w.set_string("general.name", "x");
  w.set_uint32("llama.block_count", 6);  // replaced, keeps its position
  EXPECT_EQ(w.n_kv(), 3u);
  EXPECT_TRUE(w.has("general.name"));
  EXPECT_TRUE(w.remove("general.name"));
  EXPECT_FALSE(w.remove("general.name"));
  EXPECT_FALSE(w.has("general.name"));
  const std::vector<uint8_t> bytes = w.to_bytes();  // the parsed file views these bytes
  auto f = parse_bytes(bytes);
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[1].first, "llama.block_count");
  EXPECT_EQ(*f->get_int("llama.block_count"), 6);
}

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no Error thrown; expected one mentioning " << parts[0];
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << e.what() << "' lacks '" << p << "'";
  }
}

TEST(GgufWriter, RefusesBadValues) {
  GgufWriter w;
  expect_error([&] { w.add("", gguf_uint8(1)); }, {"empty"});
  expect_error([&] { w.add("mixed", gguf_array(GgufType::INT32, {gguf_int32(1), gguf_uint32(2)})); },
               {"mixed", "item 1", "uint32", "int32"});
  expect_error([&] { w.add("deep", nested(9)); }, {"deep", "nested"});
  GgufValue bad_bool = gguf_bool(true);
  bad_bool.bits = 2;
  expect_error([&] { w.add("flag", bad_bool); }, {"flag", "bool"});
  GgufValue big = gguf_uint8(0);
  big.bits = 256;
  expect_error([&] { w.add("small", big); }, {"small", "256", "uint8"});
  GgufValue neg = gguf_int16(0);
  neg.bits = static_cast<uint64_t>(int64_t{-40000});
  expect_error([&] { w.add("short", neg); }, {"short", "-40000"});
  GgufValue bad_type;
  bad_type.type = static_cast<GgufType>(13);
  expect_error([&] { w.add("weird", bad_type); }, {"weird", "13"});
  GgufValue bad_elem = gguf_array(GgufType::UINT8, {});
  bad_elem.elem_type = static_cast<GgufType>(99);
  expect_error([&] { w.add("weird_arr", bad_elem); }, {"weird_arr", "99"});
  for (uint32_t a : {0u, 3u, 48u, 1u << 21})
    expect_error([&] { w.set_uint32("general.alignment", a); }, {"general.alignment", std::to_string(a)});
  expect_error([&] { w.set_int32("general.alignment", -32); }, {"general.alignment", "-32"});
  expect_error([&] { w.set_float32("general.alignment", 32.0f); }, {"general.alignment", "float32"});
  expect_error([&] { w.set_string("general.alignment", "32"); }, {"general.alignment", "string"});
  EXPECT_EQ(w.n_kv(), 0u);  // nothing refused was kept
  EXPECT_EQ(w.alignment(), 32u);
}

TEST(GgufWriter, RefusesBadTensors) {
  GgufWriter w;
  w.add_tensor("a", GgmlType::F32, {4}, std::vector<uint8_t>(16));
  expect_error([&] { w.add_tensor("a", GgmlType::F32, {4}, std::vector<uint8_t>(16)); }, {"duplicate", "'a'"});
  expect_error([&] { w.add_tensor("", GgmlType::F32, {4}, std::vector<uint8_t>(16)); }, {"empty"});
  expect_error([&] { w.add_tensor(std::string(64, 'n'), GgmlType::F32, {1}, std::vector<uint8_t>(4)); }, {"longer"});
  expect_error([&] { w.add_tensor("b", GgmlType::F32, {}, {}); }, {"'b'", "0 dimensions"});
  expect_error([&] { w.add_tensor("b", GgmlType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)); }, {"'b'", "5 dimensions"});
  expect_error([&] { w.add_tensor("b", GgmlType::F32, {4, 0}, {}); }, {"'b'", "dimension 1 is 0"});
  expect_error([&] { w.add_tensor("b", GgmlType::F32, {-4}, {}); }, {"'b'", "-4"});
  expect_error([&] { w.add_tensor("b", GgmlType::Q8_0, {172, 2}, std::vector<uint8_t>(400)); }, {"'b'", "172", "32"});
  expect_error([&] { w.add_tensor("b", GgmlType::F32, {4}, std::vector<uint8_t>(15)); }, {"'b'", "15", "16"});
  expect_error([&] { w.add_tensor_view("b", GgmlType::F16, {4}, nullptr, 8); }, {"'b'", "null"});
  expect_error([&] { w.add_tensor_view("b", GgmlType::F32, {int64_t{1} << 40, int64_t{1} << 40}, "", 0); },
               {"'b'", "overflow"});
  expect_error([&] { w.add_tensor_streamed("b", GgmlType::F32, {4}, nullptr); }, {"'b'", "producer"});
  EXPECT_EQ(w.n_tensors(), 1u);  // refused tensors leave no trace
  w.add_tensor("b", GgmlType::F32, {4}, std::vector<uint8_t>(16));
  EXPECT_EQ(w.n_tensors(), 2u);
}

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = static_cast<uint8_t>(seed >> 24);
  }
  return v;
}

struct TensorCase {
  const char* name;
  GgmlType type;
  std::vector<int64_t> ne;
};

const std::vector<TensorCase>& tensor_cases() {
  static const std::vector<TensorCase> cases = {
      {"f32.odd", GgmlType::F32, {7}},  // 28 bytes: the next tensor needs padding
      {"f16", GgmlType::F16, {3, 5}},
      {"q8_0", GgmlType::Q8_0, {64, 3}},
      {"q4_k", GgmlType::Q4_K, {256, 2}},
      {"i8", GgmlType::I8, {5}},
      {"bf16.4d", GgmlType::BF16, {2, 3, 2, 2}},
      {"q4_0.3d", GgmlType::Q4_0, {32, 1, 3}},
      {"iq4_nl", GgmlType::IQ4_NL, {32}},
  };
  return cases;
}

void check_tensors(const GgufFile& f, size_t alignment, uint32_t seed) {
  const auto& cases = tensor_cases();
  ASSERT_EQ(f.tensors().size(), cases.size());
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  for (size_t i = 0; i < cases.size(); i++) {
    const GgufTensorInfo& t = f.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, cases[i].name);
    EXPECT_EQ(t.type, cases[i].type);
    ASSERT_EQ(t.n_dims, static_cast<int>(cases[i].ne.size()));
    for (int d = 0; d < t.n_dims; d++) EXPECT_EQ(t.ne[d], cases[i].ne[d]);
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(t.n_bytes, row_size(t.type, t.ne[0]) * t.n_rows());
    const std::vector<uint8_t> want = pattern(t.n_bytes, seed + static_cast<uint32_t>(i));
    EXPECT_EQ(std::memcmp(t.data, want.data(), t.n_bytes), 0);
  }
}

TEST(GgufWriter, TensorsOfManyTypesAndAlignmentsRoundTrip) {
  for (size_t alignment : {size_t{32}, size_t{1}, size_t{8}, size_t{64}, size_t{4096}}) {
    SCOPED_TRACE("alignment " + std::to_string(alignment));
    GgufWriter w;
    w.set_string("general.architecture", "test");
    if (alignment != 32) w.set_alignment(alignment);
    const auto& cases = tensor_cases();
    std::vector<std::vector<uint8_t>> kept;  // data for the views, kept until written
    for (size_t i = 0; i < cases.size(); i++) {
      const TensorCase& c = cases[i];
      int64_t n = 1;
      for (int64_t x : c.ne) n *= x;
      const size_t n_bytes = row_size(c.type, c.ne[0]) * static_cast<size_t>(n / c.ne[0]);
      std::vector<uint8_t> data = pattern(n_bytes, 100 + static_cast<uint32_t>(i));
      if (i % 3 == 0) {
        w.add_tensor(c.name, c.type, c.ne, std::move(data));
      } else if (i % 3 == 1) {
        kept.push_back(std::move(data));
        w.add_tensor_view(c.name, c.type, c.ne, kept.back().data(), kept.back().size());
      } else {
        w.add_tensor_streamed(c.name, c.type, c.ne, [data](GgufTensorSink& out) {
          EXPECT_EQ(out.expected(), data.size());
          for (size_t at = 0; at < data.size(); at += 5)  // in small pieces
            out.write(data.data() + at, std::min<size_t>(5, data.size() - at));
        });
      }
    }
    const std::vector<uint8_t> bytes = w.to_bytes();
    EXPECT_EQ(bytes.size(), w.file_size());
    EXPECT_EQ(bytes.size() % alignment, 0u);
    auto f = parse_bytes(bytes);
    EXPECT_EQ(f->data_offset(), w.header_size());
    check_tensors(*f, alignment, 100);
    if (alignment == 32) {
      EXPECT_EQ(f->find("general.alignment"), nullptr);  // the default is implied
    }

    TempDir dir;
    const std::string path = dir.file("model.gguf");
    w.write(path);
    EXPECT_FALSE(fs::exists(path + ".tmp"));
    EXPECT_EQ(test::read_file(path), std::string(bytes.begin(), bytes.end()));
    auto g = GgufFile::open(path);
    check_tensors(*g, alignment, 100);
  }
}

TEST(GgufWriter, AlignmentSetAfterTensorsStillApplies) {
  GgufWriter w;
  w.add_tensor("a", GgmlType::F32, {3}, pattern(12, 1));
  w.add_tensor("b", GgmlType::F32, {3}, pattern(12, 2));
  w.set_alignment(256);
  const std::vector<uint8_t> bytes = w.to_bytes();  // the parsed file views these bytes
  auto f = parse_bytes(bytes);
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(f->find_tensor("b")->offset, 256u);
  EXPECT_EQ(f->data_offset() % 256, 0u);
}

TEST(GgufWriter, ProducerThatMisbehavesFailsAndLeavesTargetUntouched) {
  TempDir dir;
  const std::string path = dir.file("out.gguf");
  {
    std::ofstream(path) << "previous contents";
  }
  struct Case {
    const char* what;
    GgufTensorProducer producer;
    std::vector<std::string> parts;
  };
  const std::vector<uint8_t> data = pattern(64, 9);
  std::vector<Case> cases = {
      {"short", [&](GgufTensorSink& out) { out.write(data.data(), 60); }, {"'w'", "60", "64"}},
      {"long", [&](GgufTensorSink& out) { out.write(data.data(), 64); out.write(data.data(), 1); }, {"'w'", "65", "64"}},
      {"throws Error", [](GgufTensorSink&) { fail("quantizer: out of cheese"); }, {"out of cheese"}},
      {"throws std", [](GgufTensorSink&) { throw std::runtime_error("bad_alloc-ish"); }, {path, "bad_alloc-ish"}},
  };
  for (Case& c : cases) {
    SCOPED_TRACE(c.what);
    GgufWriter w;
    w.add_tensor("v", GgmlType::F32, {4}, pattern(16, 3));
    w.add_tensor_streamed("w", GgmlType::F32, {16}, c.producer);
    expect_error([&] { w.write(path); }, c.parts);
    EXPECT_FALSE(fs::exists(path + ".tmp"));
    EXPECT_EQ(test::read_file(path), "previous contents");
    expect_error([&] { w.to_bytes(); }, {c.parts.back()});
  }
}

TEST(GgufWriter, WriteFailuresNameThePath) {
  GgufWriter w;
  w.set_string("k", "v");
  expect_error([&] { w.write("/nonexistent-dir-lumen/x.gguf"); }, {"/nonexistent-dir-lumen/x.gguf.tmp", "cannot create"});
  TempDir dir;
  // Renaming a file over a non-empty directory fails: the temporary file must go.
  const std::string target = dir.file("d");
  fs::create_directories(target + "/inner");
  expect_error([&] { w.write(target); }, {target, "rename"});
  EXPECT_FALSE(fs::exists(target + ".tmp"));
  // Success replaces an existing file.
  const std::string path = dir.file("ok.gguf");
  std::ofstream(path) << "old";
  w.write(path);
  EXPECT_EQ(*GgufFile::open(path)->get_string("k"), "v");
}

// Copying a real model's metadata and tensors reproduces it; where the source was laid out as
// ggml lays files out (aligned, tensors in order, padded end), byte for byte.
TEST(GgufWriter, CopyOfRealModelsReadsBackTheSame) {
  for (const char* rel : {"models/stories260K.gguf", "models/llama-2-tiny-random.gguf",
                          "models/quant/small256-Q4_K_M-mix.gguf", "models/legacy/tinyllamas-stories-260k-f32.gguf"}) {
    SCOPED_TRACE(rel);
    if (!test::shared_exists(rel)) GTEST_SKIP() << "shared file missing: " << rel;
    auto src = GgufFile::open(test::shared_path(rel));
    GgufWriter w;
    w.copy_metadata_from(*src);
    for (const GgufTensorInfo& t : src->tensors()) w.add_tensor_view(t);
    const std::vector<uint8_t> bytes = w.to_bytes();
    auto f = parse_bytes(bytes);
    ASSERT_EQ(f->metadata().size(), src->metadata().size());
    for (size_t i = 0; i < f->metadata().size(); i++) {
      EXPECT_EQ(f->metadata()[i].first, src->metadata()[i].first);
      expect_same(src->metadata()[i].second, f->metadata()[i].second, f->metadata()[i].first);
    }
    ASSERT_EQ(f->tensors().size(), src->tensors().size());
    for (size_t i = 0; i < f->tensors().size(); i++) {
      const GgufTensorInfo& a = src->tensors()[i];
      const GgufTensorInfo& b = f->tensors()[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.type, b.type);
      EXPECT_EQ(a.shape_string(), b.shape_string());
      ASSERT_EQ(a.n_bytes, b.n_bytes);
      EXPECT_EQ(std::memcmp(a.data, b.data, a.n_bytes), 0) << a.name;
    }
    if (src->version() == 3) {
      const std::string orig = test::read_file(test::shared_path(rel));
      EXPECT_TRUE(orig == std::string(bytes.begin(), bytes.end())) << "not byte-identical to the source";
    }
  }
}

}  // namespace
}  // namespace lumen
