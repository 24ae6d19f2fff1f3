// The bench's cost model, verdicts and SVG chart (diagnostics/roofline_report.h), and the bench's
// statistics helpers (diagnostics/benchmark.h). No timing here: speeds are made-up inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "diagnostics/benchmark.h"
#include "diagnostics/roofline_report.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kernels/roofline.h"
#include "model/model_config.h"

namespace lumen {
namespace {

// A minimal XML well-formedness check: one root element, properly nested and closed tags,
// quoted attributes, no raw '<' or stray '&' in text or attribute values.
bool well_formed_xml(const std::string& s, std::string* why, std::string* root = nullptr) {
  auto bad = [&](const std::string& w, size_t at) {
    *why = w + " at offset " + std::to_string(at);
    return false;
  };
  auto check_entities = [&](size_t b, size_t e) {
    for (size_t i = b; i < e; i++) {
      if (s[i] == '<') return bad("raw '<'", i);
      if (s[i] == '&') {
        const size_t semi = s.find(';', i);
        if (semi == std::string::npos || semi > e) return bad("unterminated entity", i);
        const std::string ent = s.substr(i + 1, semi - i - 1);
        if (ent != "amp" && ent != "lt" && ent != "gt" && ent != "quot" && ent != "apos" && (ent.empty() || ent[0] != '#'))
          return bad("unknown entity &" + ent + ";", i);
      }
    }
    return true;
  };
  std::vector<std::string> stack;
  int n_roots = 0;
  size_t i = 0;
  if (s.rfind("<?xml", 0) == 0) {
    i = s.find("?>");
    if (i == std::string::npos) return bad("unterminated XML declaration", 0);
    i += 2;
  }
  while (i < s.size()) {
    const size_t lt = s.find('<', i);
    if (lt == std::string::npos) {
      if (!check_entities(i, s.size())) return false;
      for (size_t k = i; k < s.size(); k++)
        if (!std::isspace(static_cast<unsigned char>(s[k])) && stack.empty()) return bad("text after the root", k);
      break;
    }
    if (!check_entities(i, lt)) return false;
    if (stack.empty())
      for (size_t k = i; k < lt; k++)
        if (!std::isspace(static_cast<unsigned char>(s[k]))) return bad("text outside the root", k);
    const size_t gt = s.find('>', lt);
    if (gt == std::string::npos) return bad("unterminated tag", lt);
    std::string tag = s.substr(lt + 1, gt - lt - 1);
    if (!tag.empty() && tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name) return bad("mismatched </" + name + ">", lt);
      stack.pop_back();
    } else {
      const bool self_closing = !tag.empty() && tag.back() == '/';
      if (self_closing) tag.pop_back();
      size_t k = 0;
      while (k < tag.size() && !std::isspace(static_cast<unsigned char>(tag[k]))) k++;
      const std::string name = tag.substr(0, k);
      if (name.empty()) return bad("empty tag name", lt);
      // Attributes: name="value" pairs.
      while (k < tag.size()) {
        while (k < tag.size() && std::isspace(static_cast<unsigned char>(tag[k]))) k++;
        if (k == tag.size()) break;
        const size_t eq = tag.find('=', k);
        if (eq == std::string::npos || eq + 1 >= tag.size() || tag[eq + 1] != '"') return bad("unquoted attribute", lt + k);
        const size_t close = tag.find('"', eq + 2);
        if (close == std::string::npos) return bad("unterminated attribute", lt + k);
        if (!check_entities(lt + 1 + eq + 2, lt + 1 + close)) return false;
        k = close + 1;
      }
      if (stack.empty()) {
        n_roots++;
        if (root) *root = name;
      }
      if (!self_closing) stack.push_back(name);
    }
    i = gt + 1;
  }
  if (!stack.empty()) return bad("unclosed <" + stack.back() + ">", s.size());
  if (n_roots != 1) return bad("expected one root element", 0);
  return true;
}

RooflineMeasurement machine() {
  RooflineMeasurement m;
  m.isa = Isa::Avx512;
  m.n_threads = 2;
  m.dram_read_gbps = 66.0;
  m.fp32_gflops = 440.0;
  m.int8_gops = 1760.0;
  return m;
}

// TinyLlama-like shapes, Q8_0-ish sizes.
ModelCost tinyllama_cost() {
  ModelCost c;
  c.n_layer = 22;
  c.n_head = 32;
  c.n_head_kv = 4;
  c.head_dim_k = 64;
  c.head_dim_v = 64;
  c.matmul_params = 22.0 * (2048.0 * 2048 * 2 + 2048.0 * 256 * 2 + 3 * 2048.0 * 5632);
  c.output_params = 2048.0 * 32000;
  c.weight_bytes_per_token = (c.matmul_params + c.output_params) * 34.0 / 32.0 + 2048 * 34.0 / 32.0;
  c.kv_elem_bytes = 4;
  c.compute_kind = "int8";
  return c;
}

TEST(RooflineReport, DecodeBytesAndFlopsFollowTheCostModel) {
  const ModelCost c = tinyllama_cost();
  const RooflineReport r = analyze_roofline(c, {512, 128, 512}, 250.0, 40.0, machine());
  EXPECT_DOUBLE_EQ(r.decode_mean_ctx, 512 + 129 / 2.0);
  const double kv = 2.0 * 22 * 4 * 64 * 4 * r.decode_mean_ctx;
  EXPECT_DOUBLE_EQ(r.decode_kv_bytes_per_token, kv);
  EXPECT_DOUBLE_EQ(r.decode.bytes, c.weight_bytes_per_token + kv);
  EXPECT_NEAR(r.decode.gb_s, r.decode.bytes * 40.0 / 1e9, 1e-9);
  EXPECT_NEAR(r.decode.frac, r.decode.gb_s / 66.0, 1e-12);
  EXPECT_TRUE(r.decode.bandwidth_bound);
  EXPECT_NEAR(r.decode.flops, 2 * (c.matmul_params + c.output_params) + 2.0 * 2 * 22 * 32 * 64 * r.decode_mean_ctx, 1);
  EXPECT_EQ(r.decode.verdict.rfind("decode: bandwidth-bound, ", 0), 0u) << r.decode.verdict;
  EXPECT_NE(r.decode.verdict.find("of 66.0 GB/s"), std::string::npos) << r.decode.verdict;
}

TEST(RooflineReport, PrefillIsComputeBoundAgainstTheInt8Peak) {
  const ModelCost c = tinyllama_cost();
  const RooflineReport r = analyze_roofline(c, {512, 128, 512}, 250.0, 40.0, machine());
  const double attn = 2.0 * 2 * 22 * 32 * 64 * 512.0 * 512 / 2;
  EXPECT_DOUBLE_EQ(r.prefill_attn_flops, attn);
  EXPECT_NEAR(r.prefill.flops, 2 * c.matmul_params * 512 + 2 * c.output_params + attn, 1);
  EXPECT_NEAR(r.prefill.gflop_s, r.prefill.flops / (512 / 250.0) / 1e9, 1e-6);
  EXPECT_FALSE(r.prefill.bandwidth_bound);
  EXPECT_EQ(r.compute_kind, "int8");
  EXPECT_DOUBLE_EQ(r.compute_peak, 1760.0);
  EXPECT_NEAR(r.prefill.frac, r.prefill.gflop_s / 1760.0, 1e-12);
  EXPECT_EQ(r.prefill.verdict.rfind("prefill: compute-bound, ", 0), 0u) << r.prefill.verdict;
  EXPECT_NE(r.prefill.verdict.find("GFLOP/s int8"), std::string::npos) << r.prefill.verdict;
  // A batch of 64 reads the weights 8 times: lower intensity.
  const RooflineReport r64 = analyze_roofline(c, {512, 128, 64}, 250.0, 40.0, machine());
  EXPECT_NEAR(r64.prefill.bytes - r.prefill.bytes, 7 * c.weight_bytes_per_token, 1.0);
  EXPECT_LT(r64.prefill.intensity, r.prefill.intensity / 7);
}

TEST(RooflineReport, DepthAddsContextToBothPhases) {
  const ModelCost c = tinyllama_cost();
  // llama-bench's "tg128 @ d4096": no prompt, decode after 4096 context tokens.
  const RooflineReport tg = analyze_roofline(c, {0, 128, 512, 4096}, 0.0, 40.0, machine());
  EXPECT_DOUBLE_EQ(tg.decode_mean_ctx, 4096 + 129 / 2.0);
  EXPECT_DOUBLE_EQ(tg.decode_kv_bytes_per_token, 2.0 * 22 * 4 * 64 * 4 * tg.decode_mean_ctx);
  EXPECT_EQ(tg.prefill.flops, 0.0);
  // "pp512 @ d512": each prompt token attends over the depth and the prompt before it.
  const RooflineReport pp = analyze_roofline(c, {512, 0, 512, 512}, 250.0, 0.0, machine());
  EXPECT_DOUBLE_EQ(pp.prefill_attn_flops, 2.0 * 2 * 22 * 32 * 64 * 512.0 * (512 + 512 / 2.0));
  EXPECT_EQ(pp.decode_mean_ctx, 0.0);
  const RooflineReport pp0 = analyze_roofline(c, {512, 0, 512, 0}, 250.0, 0.0, machine());
  EXPECT_NEAR(pp.prefill.bytes - pp0.prefill.bytes, 2.0 * 22 * 4 * 64 * 4 * 512, 1.0);  // the depth's KV, read once
}

TEST(RooflineReport, ComputeCeilingFollowsTheWeightTypes) {
  ModelCost c = tinyllama_cost();
  c.compute_kind = "bf16";
  RooflineReport r = analyze_roofline(c, {512, 128, 512}, 250.0, 40.0, machine());
  EXPECT_EQ(r.compute_kind, "bf16");
  EXPECT_DOUBLE_EQ(r.compute_peak, 880.0);
  c.compute_kind = "fp32";
  r = analyze_roofline(c, {512, 128, 512}, 250.0, 40.0, machine());
  EXPECT_EQ(r.compute_kind, "fp32");
  EXPECT_DOUBLE_EQ(r.compute_peak, 440.0);
  // Without a measured int8 peak (no VNNI), integer types are judged against FP32.
  RooflineMeasurement m = machine();
  m.int8_gops = 0;
  m.isa = Isa::Avx2;
  c.compute_kind = "int8";
  r = analyze_roofline(c, {512, 128, 512}, 250.0, 40.0, m);
  EXPECT_EQ(r.compute_kind, "fp32");
  EXPECT_EQ(r.ceilings.size(), 1u);
}

TEST(RooflineReport, ZeroSpeedsGiveZeroRates) {
  const RooflineReport r = analyze_roofline(tinyllama_cost(), {32, 0, 512}, 0.0, 0.0, machine());
  EXPECT_EQ(r.decode.gb_s, 0.0);
  EXPECT_EQ(r.decode.frac, 0.0);
  EXPECT_EQ(r.prefill.gflop_s, 0.0);
  std::string why;
  EXPECT_TRUE(well_formed_xml(roofline_svg(r, "t", "s"), &why)) << why;
}

// Decode above the DRAM read measured for it: from the caches where a step's bytes fit in them,
// else the bandwidth moved between the measurement and the test (the verdict says which).
TEST(RooflineReport, AboveDramSaysWhetherTheCachesCanExplainIt) {
  RooflineMeasurement m = machine();
  m.cache_bytes = size_t{36} << 20;
  ModelCost big = tinyllama_cost();  // ~1.2 GB a step: 80 tok/s is ~94 GB/s, above 66
  const RooflineReport moved = analyze_roofline(big, {0, 128, 512}, 0.0, 80.0, m);
  ASSERT_GT(moved.decode.frac, 1.0);
  EXPECT_NE(moved.decode.verdict.find("the machine's bandwidth moved while it ran"), std::string::npos)
      << moved.decode.verdict;
  EXPECT_EQ(moved.decode.verdict.find("fits in the caches"), std::string::npos) << moved.decode.verdict;

  ModelCost small = big;  // 10 MB of weights and a short context: fits in 36 MiB
  small.n_layer = 1;
  small.matmul_params = 5e6;
  small.output_params = 0;
  small.weight_bytes_per_token = 10e6;
  const RooflineReport cached = analyze_roofline(small, {0, 16, 512}, 0.0, 8000.0, m);
  ASSERT_GT(cached.decode.frac, 1.0);
  EXPECT_NE(cached.decode.verdict.find("the working set fits in the caches"), std::string::npos)
      << cached.decode.verdict;

  m.cache_bytes = 0;  // caches unknown: both readings
  const RooflineReport unknown = analyze_roofline(big, {0, 128, 512}, 0.0, 80.0, m);
  EXPECT_NE(unknown.decode.verdict.find("served by the caches, or the bandwidth moved"), std::string::npos)
      << unknown.decode.verdict;
}

GgufTensorInfo fake_tensor(const char* name, GgmlType t, int64_t ne0, int64_t ne1) {
  GgufTensorInfo i;
  i.name = name;
  i.type = t;
  i.n_dims = ne1 > 1 ? 2 : 1;
  i.ne[0] = ne0;
  i.ne[1] = ne1;
  i.n_bytes = row_size(t, ne0) * static_cast<size_t>(ne1);
  return i;
}

std::unique_ptr<GgufFile> file_with(const std::vector<GgufTensorInfo>& ts, std::vector<uint8_t>* keep) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  for (const auto& t : ts)
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), std::vector<uint8_t>(t.n_bytes));
  *keep = w.to_bytes();
  return GgufFile::parse(keep->data(), keep->size(), "fake.gguf");
}

TEST(RooflineReport, ModelCostCountsMatricesAndTheEmbeddingRow) {
  std::vector<uint8_t> bytes;
  auto f = file_with({fake_tensor("token_embd.weight", GgmlType::Q8_0, 64, 100),
                      fake_tensor("output.weight", GgmlType::Q6_K, 256, 100),
                      fake_tensor("blk.0.attn_q.weight", GgmlType::Q8_0, 64, 64),
                      fake_tensor("blk.0.attn_norm.weight", GgmlType::F32, 64, 1)},
                     &bytes);
  ModelConfig cfg;
  cfg.n_layer = 1;
  cfg.n_head = 2;
  cfg.n_head_kv = 1;
  cfg.head_dim_k = cfg.head_dim_v = 32;
  const ModelCost c = model_cost(*f, cfg, 1000, GgmlType::F16, GgmlType::F16);
  EXPECT_FALSE(c.tied_output);
  EXPECT_DOUBLE_EQ(c.matmul_params, 64.0 * 64);
  EXPECT_DOUBLE_EQ(c.output_params, 256.0 * 100);
  EXPECT_DOUBLE_EQ(c.weight_bytes_per_token, 1000.0 + 34.0 * 2);  // one Q8_0 row of 64
  EXPECT_DOUBLE_EQ(c.kv_elem_bytes, 2.0);
  // K and V of different types: their stored rows (one 32-element block each here), averaged
  // over the elements; a row of 40 elements pads to two blocks.
  EXPECT_DOUBLE_EQ(model_cost(*f, cfg, 1000, GgmlType::Q8_0, GgmlType::Q4_0).kv_elem_bytes, (34.0 + 18.0) / 64.0);
  ModelConfig odd = cfg;
  odd.head_dim_k = odd.head_dim_v = 40;
  EXPECT_DOUBLE_EQ(model_cost(*f, odd, 1000, GgmlType::Q8_0, GgmlType::Q8_0).kv_elem_bytes, 4.0 * 34.0 / 80.0);
  EXPECT_EQ(c.compute_kind, "int8");
  ASSERT_EQ(c.type_mix.size(), 3u);
  EXPECT_EQ(c.type_mix[0].type, GgmlType::Q6_K);  // most bytes first
  EXPECT_NE(c.type_mix_string().find("Q8_0 x2"), std::string::npos) << c.type_mix_string();

  // Tied: the embedding table is the output matrix. F16 weights run on FP32 FMAs, unless
  // computed as BF16.
  auto g = file_with({fake_tensor("token_embd.weight", GgmlType::F16, 64, 100),
                      fake_tensor("blk.0.attn_q.weight", GgmlType::F16, 64, 64)},
                     &bytes);
  const ModelCost t = model_cost(*g, cfg, 1000, GgmlType::F32, GgmlType::F32);
  EXPECT_TRUE(t.tied_output);
  EXPECT_DOUBLE_EQ(t.output_params, 6400.0);
  EXPECT_DOUBLE_EQ(t.weight_bytes_per_token, 1000.0);
  EXPECT_EQ(t.compute_kind, "fp32");
  EXPECT_EQ(model_cost(*g, cfg, 1000, GgmlType::F32, GgmlType::F32, /*f16_as_bf16=*/true).compute_kind, "bf16");
}

TEST(RooflineReport, SvgIsAWellFormedChartWithTheExpectedParts) {
  const RooflineReport r = analyze_roofline(tinyllama_cost(), {512, 128, 512}, 250.0, 40.0, machine());
  const std::string svg = roofline_svg(r, "Roofline: a <model> & \"friends\"", "p=512 n=128");
  std::string why, root;
  ASSERT_TRUE(well_formed_xml(svg, &why, &root)) << why;
  EXPECT_EQ(root, "svg");
  EXPECT_NE(svg.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("a &lt;model&gt; &amp; &quot;friends&quot;"), std::string::npos);
  EXPECT_NE(svg.find("DRAM read 66.0 GB/s"), std::string::npos);
  EXPECT_NE(svg.find("FP32 FMA peak 440 GFLOP/s"), std::string::npos);
  EXPECT_NE(svg.find("int8 VNNI peak 1760 GOP/s"), std::string::npos);
  EXPECT_NE(svg.find(">decode "), std::string::npos);
  EXPECT_NE(svg.find(">prefill "), std::string::npos);
  EXPECT_NE(svg.find("arithmetic intensity (FLOP/byte)"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(RooflineReport, ChecksTheXmlChecker) {
  std::string why;
  EXPECT_FALSE(well_formed_xml("<svg><g></svg>", &why));
  EXPECT_FALSE(well_formed_xml("<svg a=b/>", &why));
  EXPECT_FALSE(well_formed_xml("<svg>a & b</svg>", &why));
  EXPECT_FALSE(well_formed_xml("<svg/><svg/>", &why));
  EXPECT_TRUE(well_formed_xml("<?xml version=\"1.0\"?>\n<svg a=\"1\"><g/>x &amp; y</svg>\n", &why)) << why;
}

TEST(RooflineReport, Format3Sig) {
  EXPECT_EQ(format_3sig(1760.4), "1760");
  EXPECT_EQ(format_3sig(66.24), "66.2");
  EXPECT_EQ(format_3sig(2.345), "2.35");
  EXPECT_EQ(format_3sig(0.1234), "0.123");
  EXPECT_EQ(format_3sig(0), "0");
}

TEST(BenchStats, MedianAndPercentile) {
  EXPECT_EQ(median({}), 0.0);
  EXPECT_EQ(median({3, 1, 2}), 2.0);
  EXPECT_EQ(median({4, 1, 2, 3}), 2.5);
  std::vector<double> v;
  for (int i = 1; i <= 100; i++) v.push_back(101 - i);
  EXPECT_EQ(percentile(v, 50), 50.0);
  EXPECT_EQ(percentile(v, 99), 99.0);
  EXPECT_EQ(percentile(v, 100), 100.0);
  EXPECT_EQ(percentile({7}, 99), 7.0);
}

TEST(BenchStats, PromptIsSeededAndInVocabulary) {
  const auto a = bench_prompt(300, 512, 1, 42);
  const auto b = bench_prompt(300, 512, 1, 42);
  const auto c = bench_prompt(300, 512, 1, 43);
  ASSERT_EQ(a.size(), 300u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a[0], 1);
  for (int32_t t : a) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 512);
  }
  EXPECT_NE(bench_prompt(5, 512, -1, 42)[0], -1);
}

}  // namespace
}  // namespace lumen
