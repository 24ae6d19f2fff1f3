// Every architecture's loader refuses a file with a missing, misshapen or unused tensor, or a
// wrong key, with an error naming it; an unknown architecture names itself and the known ones.
// The files are the synthetic references' (../shared/tools/synth_gguf.py), rewritten with one
// change.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

#include <unistd.h>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kv/sequence_kv.h"
#include "model/model.h"
#include "test_support.h"

namespace lumen {
namespace {

struct Family {
  const char* json_rel;
  const char* args;
  const char* tensor;  // a per-layer tensor of this architecture only
};

const Family kFamilies[] = {
    {"synth-phi3-mini-2l-f32.json", "--preset phi3-mini --layers 2 --type f32", "blk.1.ffn_up.weight"},  // fused gate/up
    {"synth-gemma2-2b-2l-f32.json", "--preset gemma2-2b --layers 2 --type f32", "blk.1.post_ffw_norm.weight"},
    {"synth-gemma3-1b-2l-f32.json", "--preset gemma3-1b --layers 2 --type f32", "blk.0.attn_k_norm.weight"},
    {"synth-llama-yarn-2l-f32.json", "--preset llama-yarn --layers 2 --type f32", "blk.1.ffn_up.weight"},
    {"synth-qwen3moe-30b-a3b-2l-f32.json", "--preset qwen3moe-30b-a3b --layers 2 --type f32", "blk.1.ffn_down_exps.weight"},
};

std::string synth(const Family& fam, std::string* why) { return test::synth_reference(fam.json_rel, fam.args, why); }

std::string load_error(const std::string& path) {
  try {
    Model::load(GgufFile::open(path));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A scratch directory for a test's rewritten files, removed when the test leaves (an ASSERT too).
struct ScratchDir {
  std::string path;
  explicit ScratchDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("lumen-" + name + "-" + std::to_string(getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
};

// Calls fn for each family whose synthetic file could be made (the others skipped); how many.
int for_each_family(const std::function<void(const Family&, const std::string& path)>& fn) {
  int ran = 0;
  for (const Family& fam : kFamilies) {
    std::string why;
    const std::string path = synth(fam, &why);
    if (path.empty()) continue;
    SCOPED_TRACE(fam.json_rel);
    fn(fam, path);
    ran++;
  }
  return ran;
}

TEST(ModelFamilies, BrokenFilesAreRefusedByName) {
  const int ran = for_each_family([](const Family& fam, const std::string& path) {
    std::shared_ptr<const GgufFile> f = GgufFile::open(path);
    ASSERT_NO_THROW(Model::load(f));
    const ScratchDir scratch("families");
    const std::string& dir = scratch.path;
    auto keep = [](GgufWriter&) {};
    // Missing.
    const std::string missing = test::rewrite_gguf(
        *f, dir + "/missing.gguf", keep, [&](const GgufTensorInfo& t, GgufWriter&) { return t.name != fam.tensor; });
    std::string err = load_error(missing);
    EXPECT_NE(err.find(fam.tensor), std::string::npos) << err;
    EXPECT_NE(err.find("missing"), std::string::npos) << err;
    // Misshapen: one row short.
    std::vector<uint8_t> bytes;
    const std::string short_path =
        test::rewrite_gguf(*f, dir + "/short.gguf", keep, [&](const GgufTensorInfo& t, GgufWriter& w) {
          if (t.name != fam.tensor) return true;
          std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
          if (ne.size() == 1)
            ne[0] -= 1;
          else
            ne[1] -= 1;
          int64_t n = 1;
          for (int64_t x : ne) n *= x;
          w.add_tensor(t.name, t.type, ne, std::vector<uint8_t>(t.data, t.data + n * 4));  // F32 files
          return false;
        });
    err = load_error(short_path);
    EXPECT_NE(err.find(fam.tensor), std::string::npos) << err;
    EXPECT_NE(err.find("shape"), std::string::npos) << err;
    // A tensor the architecture does not compute with (here a LayerNorm bias, which no RMSNorm
    // architecture reads) is refused by name, never silently dropped.
    const std::string extra =
        test::rewrite_gguf(*f, dir + "/extra.gguf", keep, [&](const GgufTensorInfo& t, GgufWriter& w) {
          if (t.name == fam.tensor)
            w.add_tensor("blk.0.attn_norm.bias", GgmlType::F32, {4}, std::vector<uint8_t>(16, 0));
          return true;
        });
    err = load_error(extra);
    EXPECT_NE(err.find("'blk.0.attn_norm.bias' is not used"), std::string::npos) << err;
    // An architecture lumen does not know.
    const std::string unknown = test::rewrite_gguf(
        *f, dir + "/unknown.gguf", [](GgufWriter& w) { w.set_string("general.architecture", "gemma9"); });
    err = load_error(unknown);
    EXPECT_NE(err.find("unknown architecture 'gemma9'"), std::string::npos) << err;
    EXPECT_NE(err.find("gemma2"), std::string::npos) << err;  // the list of known ones
  });
  if (ran == 0) GTEST_SKIP() << "no synthetic references";
}

// Every family's batch invariance, bit for bit: a sequence decoded a token at a time, in chunks
// of 5 and as one batch gives every position the same logits, on 1, 2 and 3 threads (decode's
// matmuls are shared out as per-thread ranges with stealing, the others as chunks).
TEST(ModelFamilies, DecodeChunksAndThreadsGiveTheBatchBits) {
  const int ran = for_each_family([](const Family&, const std::string& path) {
    const std::shared_ptr<const GgufFile> file = GgufFile::open(path);
    constexpr int kTokens = 24;
    std::vector<float> reference;
    for (int threads : {2, 1, 3}) {
      ModelOptions opt;
      opt.n_threads = threads;
      opt.n_batch = kTokens;
      auto model = Model::load(file, opt);
      const int64_t n_vocab = model->config().n_vocab;
      for (int chunk : {kTokens, 1, 5}) {
        SequenceKv kv(model->kv_layout(GgmlType::F32, GgmlType::F32, 16), 1, 64);
        std::vector<float> logits(kTokens * n_vocab);
        for (int first = 0; first < kTokens; first += chunk) {
          Batch b;
          for (int i = first; i < std::min(kTokens, first + chunk); i++) kv.add(b, 1 + (i * 37) % 250, i, 0, true);
          model->forward(b, kv.storage(), &logits[first * n_vocab]);
        }
        if (reference.empty()) reference = logits;
        EXPECT_EQ(std::memcmp(logits.data(), reference.data(), logits.size() * sizeof(float)), 0)
            << threads << " threads, chunks of " << chunk;
      }
    }
  });
  if (ran == 0) GTEST_SKIP() << "no synthetic references";
}

// The logits after each of a few tokens, one sequence, decoded one token at a time.
std::vector<float> logits_of(const std::string& path, int64_t n_ctx_seq) {
  ModelOptions opt;
  opt.n_threads = 2;
  opt.n_ctx_seq = n_ctx_seq;
  auto model = Model::load(GgufFile::open(path), opt);
  const int64_t n_vocab = model->config().n_vocab;
  SequenceKv kv(model->kv_layout(GgmlType::F16, GgmlType::F16, 16), 1, 64);
  std::vector<float> all, logits(n_vocab);
  for (int i = 0; i < 40; i++) {
    Batch b;
    kv.add(b, 1 + (i * 37) % 250, i, 0, true);
    model->forward(b, kv.storage(), logits.data());
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

// LongRoPE (Phi-3 128k, Phi-4-mini): rope_factors_long/short divide each pair's angle; the long
// ones apply when a sequence may hold more than the original context, as llama.cpp chooses
// them. Factors of 2 must then give exactly linear scaling by 2 (t / 2 and t * 0.5 are the same
// float), factors of 1 exactly no scaling; rope.scaling.attn_factor scales cos and sin.
TEST(ModelFamilies, LongRopeFactorsFollowTheContextSize) {
  std::string why;
  const std::string plain = synth(kFamilies[0], &why);
  if (plain.empty()) GTEST_SKIP() << why;
  std::shared_ptr<const GgufFile> f = GgufFile::open(plain);
  const int64_t pairs = f->require_int("phi3.rope.dimension_count") / 2;
  const ScratchDir scratch("longrope");
  const std::string& dir = scratch.path;
  auto factors = [&](float v) {
    std::vector<uint8_t> bytes(static_cast<size_t>(pairs) * 4);
    for (int64_t i = 0; i < pairs; i++) std::memcpy(&bytes[i * 4], &v, 4);
    return bytes;
  };
  auto longrope = [&](const std::string& name, float attn_factor) {
    return test::rewrite_gguf(*f, dir + "/" + name, [&](GgufWriter& w) {
      w.set_int32("phi3.rope.scaling.original_context_length", 64);
      if (attn_factor != 1.0f) w.set_float32("phi3.rope.scaling.attn_factor", attn_factor);
      w.add_tensor("rope_factors_long.weight", GgmlType::F32, {pairs}, factors(2.0f));
      w.add_tensor("rope_factors_short.weight", GgmlType::F32, {pairs}, factors(1.0f));
    });
  };
  const std::string lr = longrope("longrope.gguf", 1.0f);
  const std::string linear = test::rewrite_gguf(*f, dir + "/linear.gguf", [](GgufWriter& w) {
    w.set_string("phi3.rope.scaling.type", "linear");
    w.set_float32("phi3.rope.scaling.factor", 2.0f);
  });
  const auto base = logits_of(plain, 64);
  EXPECT_EQ(logits_of(lr, 64), base) << "a context of 64 (the original) takes the short factors";
  const auto scaled = logits_of(linear, 128);
  EXPECT_NE(scaled, base);
  EXPECT_EQ(logits_of(lr, 128), scaled) << "a context of 128 takes the long factors";
  EXPECT_NE(logits_of(longrope("attn.gguf", 1.25f), 64), base) << "rope.scaling.attn_factor is applied";
  // One of the pair missing is refused by name.
  const std::string one = test::rewrite_gguf(*f, dir + "/one.gguf", [&](GgufWriter& w) {
    w.add_tensor("rope_factors_long.weight", GgmlType::F32, {pairs}, factors(2.0f));
  });
  const std::string err = load_error(one);
  EXPECT_NE(err.find("rope_factors_short.weight"), std::string::npos) << err;
  // A LongRoPE scaling type without its factors is refused, not run unscaled.
  const std::string bare = test::rewrite_gguf(
      *f, dir + "/bare.gguf", [](GgufWriter& w) { w.set_string("phi3.rope.scaling.type", "longrope"); });
  const std::string bare_err = load_error(bare);
  EXPECT_NE(bare_err.find("rope_factors_long.weight"), std::string::npos) << bare_err;
}

// Gemma 3 4B-27B scale RoPE linearly (factor 8) on their global layers only: llama.cpp gives
// gemma3's sliding-window layers their own base and a scale of 1. The synthetic file's blk.0 is
// windowed and blk.1 global (pattern 2); with pattern 0 every layer is windowed. An array-typed
// pattern is not read (../shared/reference/README.md).
TEST(ModelFamilies, Gemma3ScalesOnlyItsGlobalLayersAndReadsItsPatternAsANumber) {
  std::string why;
  const std::string plain = synth(kFamilies[2], &why);
  if (plain.empty()) GTEST_SKIP() << why;
  std::shared_ptr<const GgufFile> f = GgufFile::open(plain);
  const ScratchDir scratch("gemma3-rope");
  const std::string& dir = scratch.path;
  auto variant = [&](const std::string& name, bool all_windowed, bool scaled) {
    return test::rewrite_gguf(*f, dir + "/" + name, [&](GgufWriter& w) {
      if (all_windowed) w.set_int32("gemma3.attention.sliding_window_pattern", 0);
      if (scaled) {
        w.set_string("gemma3.rope.scaling.type", "linear");
        w.set_float32("gemma3.rope.scaling.factor", 8.0f);
      }
    });
  };
  const auto base = logits_of(plain, 64);
  EXPECT_NE(logits_of(variant("scaled.gguf", false, true), 64), base) << "the global layer is scaled";
  const auto windowed = logits_of(variant("windowed.gguf", true, false), 64);
  EXPECT_NE(windowed, base);
  EXPECT_EQ(logits_of(variant("windowed-scaled.gguf", true, true), 64), windowed) << "windowed layers are not scaled";
  // An array-typed pattern is ignored (llama.cpp reads gemma3's as a number): the default, 6,
  // windows both layers, as pattern 0 does.
  const std::string array = test::rewrite_gguf(*f, dir + "/array.gguf", [](GgufWriter& w) {
    w.add("gemma3.attention.sliding_window_pattern", gguf_array(GgufType::BOOL, {gguf_bool(false), gguf_bool(false)}));
  });
  EXPECT_EQ(logits_of(array, 64), windowed) << "an array pattern is ignored";
}

// llama with `expert_count` (Mixtral) runs every FFN as a mixture of SwiGLU experts routed as
// qwen3moe's (llama.cpp's build of llama). A dense file rewritten with two experts and a router of
// zeros (equal probabilities: the lowest index wins a tie) must give the dense bits when expert 0
// is the dense FFN, and also when both are and both are used (weights 1/2 each: exact); another
// expert 0 changes them.
TEST(ModelFamilies, LlamaWithExpertsRunsAMixture) {
  std::string why;
  const std::string plain = synth(kFamilies[3], &why);  // llama (YaRN), 2 layers, F32
  if (plain.empty()) GTEST_SKIP() << why;
  std::shared_ptr<const GgufFile> f = GgufFile::open(plain);
  const int64_t n_embd = f->require_int("llama.embedding_length");
  const ScratchDir scratch("llama-moe");
  const std::string& dir = scratch.path;
  // expert0 / expert1: "dense" (the file's F32 matrix) or "other" (the same negated).
  auto mixture = [&](const std::string& name, int used, const char* expert0, const char* expert1, bool drop_up) {
    return test::rewrite_gguf(
        *f, dir + "/" + name,
        [&](GgufWriter& w) {
          w.set_uint32("llama.expert_count", 2);
          w.set_uint32("llama.expert_used_count", static_cast<uint32_t>(used));
        },
        [&](const GgufTensorInfo& t, GgufWriter& w) {
          const std::string n = t.name;
          const size_t dot = n.rfind(".weight");
          const std::string kind = dot == std::string::npos ? "" : n.substr(n.find('.', 4) + 1, dot - n.find('.', 4) - 1);
          if (kind != "ffn_gate" && kind != "ffn_up" && kind != "ffn_down") return true;
          const std::string layer = n.substr(0, n.find('.', 4));
          if (kind == "ffn_gate")
            w.add_tensor(layer + ".ffn_gate_inp.weight", GgmlType::F32, {n_embd, 2},
                         std::vector<uint8_t>(static_cast<size_t>(n_embd) * 2 * 4, 0));
          if (kind == "ffn_up" && drop_up) return false;
          std::vector<uint8_t> both;
          for (const char* which : {expert0, expert1}) {
            std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
            if (std::string(which) == "other")
              for (size_t b = 3; b < bytes.size(); b += 4) bytes[b] ^= 0x80;  // F32 sign bits
            both.insert(both.end(), bytes.begin(), bytes.end());
          }
          w.add_tensor(layer + "." + kind + "_exps.weight", t.type, {t.ne[0], t.ne[1], 2}, std::move(both));
          return false;
        });
  };
  const auto dense = logits_of(plain, 64);
  EXPECT_EQ(logits_of(mixture("first.gguf", 1, "dense", "other", false), 64), dense) << "expert 0 wins the tie";
  EXPECT_EQ(logits_of(mixture("both.gguf", 2, "dense", "dense", false), 64), dense) << "two halves of the same FFN";
  EXPECT_NE(logits_of(mixture("second.gguf", 1, "other", "dense", false), 64), dense) << "expert 0 is the first slice";
  const std::string err = load_error(mixture("no-up.gguf", 1, "dense", "dense", true));
  EXPECT_NE(err.find("blk.0.ffn_up_exps.weight"), std::string::npos) << err;
}

// llama.cpp reads a missing rope.scaling.type as "linear": rope.scaling.factor (or the older
// rope.scale_linear) alone scales, as the type and factor together do; type "none" never scales.
TEST(ModelFamilies, ARopeFactorWithoutATypeScalesLinearly) {
  std::string why;
  const std::string plain = synth(kFamilies[0], &why);  // phi3: no scaling keys
  if (plain.empty()) GTEST_SKIP() << why;
  std::shared_ptr<const GgufFile> f = GgufFile::open(plain);
  const ScratchDir scratch("rope-factor");
  const std::string& dir = scratch.path;
  // key: rope.scaling.factor, or the older rope.scale_linear llama.cpp reads in its place.
  auto scaled = [&](const std::string& name, const char* type, const char* key = "phi3.rope.scaling.factor") {
    return test::rewrite_gguf(*f, dir + "/" + name, [&](GgufWriter& w) {
      if (type) w.set_string("phi3.rope.scaling.type", type);
      w.set_float32(key, 2.0f);
    });
  };
  const auto base = logits_of(plain, 64);
  const auto linear = logits_of(scaled("linear.gguf", "linear"), 64);
  EXPECT_NE(linear, base);
  EXPECT_EQ(logits_of(scaled("bare.gguf", nullptr), 64), linear);
  EXPECT_EQ(logits_of(scaled("old.gguf", nullptr, "phi3.rope.scale_linear"), 64), linear);
  EXPECT_EQ(logits_of(scaled("none.gguf", "none"), 64), base) << "type none never scales";
  EXPECT_EQ(logits_of(scaled("none-old.gguf", "none", "phi3.rope.scale_linear"), 64), base);
}

// gemma2 as llama.cpp reads it: a window of 4096 when the file names none, on every second
// layer; an array-typed pattern is ignored (the default pattern applies), as for gemma3.
TEST(ModelFamilies, Gemma2WindowDefaultsTo4096AndItsPatternIsANumber) {
  std::string why;
  const std::string plain = synth(kFamilies[1], &why);  // gemma2, window 32, no pattern key
  if (plain.empty()) GTEST_SKIP() << why;
  std::shared_ptr<const GgufFile> f = GgufFile::open(plain);
  const ScratchDir scratch("gemma2-window");
  const std::string& dir = scratch.path;
  auto windows = [](const std::string& path) {
    ModelOptions opt;
    opt.n_threads = 1;
    opt.n_ctx_seq = 64;
    return Model::load(GgufFile::open(path), opt)->config().layer_window;
  };
  EXPECT_EQ(windows(plain), (std::vector<int32_t>{32, 0}));
  const std::string bare =
      test::rewrite_gguf(*f, dir + "/bare.gguf", [](GgufWriter& w) { w.remove("gemma2.attention.sliding_window"); });
  EXPECT_EQ(windows(bare), (std::vector<int32_t>{4096, 0}));
  const std::string array = test::rewrite_gguf(*f, dir + "/array.gguf", [](GgufWriter& w) {
    w.add("gemma2.attention.sliding_window_pattern", gguf_array(GgufType::BOOL, {gguf_bool(false), gguf_bool(true)}));
  });
  EXPECT_EQ(windows(array), (std::vector<int32_t>{32, 0}));
  const std::string number = test::rewrite_gguf(
      *f, dir + "/number.gguf", [](GgufWriter& w) { w.set_uint32("gemma2.attention.sliding_window_pattern", 0); });
  EXPECT_EQ(windows(number), (std::vector<int32_t>{32, 32}));
}

// llama takes any bias the file holds, each on its own, as llama.cpp loads them: Q, K, V, the
// output projection's and the FFN's. Zero biases change nothing; a V bias b passes through the
// softmax (its weights sum to 1) and so equals an output bias of W_o times b per head.
TEST(ModelFamilies, LlamaTakesTheBiasesItsFileHolds) {
  std::string why;
  const std::string plain = synth(kFamilies[3], &why);  // llama (YaRN), 2 layers, F32
  if (plain.empty()) GTEST_SKIP() << why;
  std::shared_ptr<const GgufFile> f = GgufFile::open(plain);
  const int64_t d = f->require_int("llama.embedding_length"), ff = f->require_int("llama.feed_forward_length");
  const int64_t dk = f->require_int("llama.attention.key_length");
  const int64_t q_dim = f->require_int("llama.attention.head_count") * dk;
  const int64_t kv_dim = f->require_int("llama.attention.head_count_kv") * dk;
  const ScratchDir scratch("llama-bias");
  const std::string& dir = scratch.path;
  auto floats = [](const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  // biases: name (after "blk.N.") -> values, added to every layer.
  auto with = [&](const std::string& name, const std::map<std::string, std::vector<float>>& biases) {
    return test::rewrite_gguf(
        *f, dir + "/" + name, [](GgufWriter&) {},
        [&](const GgufTensorInfo& t, GgufWriter& w) {
          if (t.name.rfind("blk.", 0) == 0 && t.name.find(".attn_norm.weight") != std::string::npos) {
            const std::string layer = t.name.substr(0, t.name.find(".attn_norm"));
            for (const auto& [b, v] : biases)
              w.add_tensor(layer + "." + b, GgmlType::F32, {static_cast<int64_t>(v.size())}, floats(v));
          }
          return true;
        });
  };
  auto zeros = [](int64_t n) { return std::vector<float>(static_cast<size_t>(n), 0.0f); };
  const auto base = logits_of(plain, 64);
  EXPECT_EQ(logits_of(with("zero.gguf", {{"attn_q.bias", zeros(q_dim)},
                                         {"attn_k.bias", zeros(kv_dim)},
                                         {"attn_v.bias", zeros(kv_dim)},
                                         {"attn_output.bias", zeros(d)},
                                         {"ffn_gate.bias", zeros(ff)},
                                         {"ffn_up.bias", zeros(ff)},
                                         {"ffn_down.bias", zeros(d)}}),
                      64),
            base);
  std::vector<float> bv(static_cast<size_t>(kv_dim));
  for (size_t j = 0; j < bv.size(); j++) bv[j] = 0.05f * static_cast<float>(static_cast<int>(j % 7) - 3);
  // The V bias goes into layer 0 only, and its image under layer 0's W_o into its output bias.
  const GgufTensorInfo* wo = f->find_tensor("blk.0.attn_output.weight");
  ASSERT_TRUE(wo && wo->type == GgmlType::F32);
  std::vector<float> bo(static_cast<size_t>(d), 0.0f);
  for (int64_t r = 0; r < d; r++) {
    double acc = 0.0;
    for (int64_t j = 0; j < q_dim; j++) {
      float w;
      std::memcpy(&w, wo->data + (r * q_dim + j) * 4, 4);
      acc += static_cast<double>(w) * bv[static_cast<size_t>(j % kv_dim)];
    }
    bo[static_cast<size_t>(r)] = static_cast<float>(acc);
  }
  auto layer0 = [&](const std::string& name, const std::string& bias, const std::vector<float>& v) {
    return test::rewrite_gguf(
        *f, dir + "/" + name, [](GgufWriter&) {},
        [&](const GgufTensorInfo& t, GgufWriter& w) {
          if (t.name == "blk.0.attn_norm.weight")
            w.add_tensor("blk.0." + bias, GgmlType::F32, {static_cast<int64_t>(v.size())}, floats(v));
          return true;
        });
  };
  const auto via_v = logits_of(layer0("v.gguf", "attn_v.bias", bv), 64);
  const auto via_o = logits_of(layer0("o.gguf", "attn_output.bias", bo), 64);
  EXPECT_NE(via_v, base);
  ASSERT_EQ(via_v.size(), via_o.size());
  // The same up to the F16 cache's rounding of V + b against V: a small part of the bias's effect.
  float worst = 0.0f, effect = 0.0f;
  for (size_t i = 0; i < via_v.size(); i++) {
    worst = std::max(worst, std::fabs(via_v[i] - via_o[i]));
    effect = std::max(effect, std::fabs(via_v[i] - base[i]));
  }
  EXPECT_LT(worst, 0.02f * effect) << "effect " << effect;
  EXPECT_NE(logits_of(layer0("gate.gguf", "ffn_gate.bias", std::vector<float>(static_cast<size_t>(ff), 0.1f)), 64),
            base);
  EXPECT_NE(logits_of(layer0("up.gguf", "ffn_up.bias", std::vector<float>(static_cast<size_t>(ff), 0.1f)), 64), base);
  // A misshapen optional bias is still an error naming it.
  const std::string err = load_error(layer0("bad.gguf", "ffn_down.bias", zeros(d - 1)));
  EXPECT_NE(err.find("blk.0.ffn_down.bias"), std::string::npos) << err;
}

// qwen3moe without expert_feed_forward_length: the experts are feed_forward_length /
// expert_used_count wide, as llama.cpp reads it.
TEST(ModelFamilies, Qwen3MoeExpertWidthFallsBackAsLlamaCppReadsIt) {
  std::string why;
  const std::string plain = synth(kFamilies[4], &why);  // qwen3moe: 16 experts of 96, 4 used
  if (plain.empty()) GTEST_SKIP() << why;
  std::shared_ptr<const GgufFile> f = GgufFile::open(plain);
  const ScratchDir scratch("qwen3moe-width");
  const int64_t ff = f->require_int("qwen3moe.expert_feed_forward_length");
  const int64_t used = f->require_int("qwen3moe.expert_used_count");
  auto without_key = [&](const std::string& name, int64_t n_ff) {
    return test::rewrite_gguf(*f, scratch.path + "/" + name, [&](GgufWriter& w) {
      w.remove("qwen3moe.expert_feed_forward_length");
      w.set_uint32("qwen3moe.feed_forward_length", static_cast<uint32_t>(n_ff));
    });
  };
  EXPECT_EQ(logits_of(without_key("fallback.gguf", ff * used), 64), logits_of(plain, 64));
  const std::string err = load_error(without_key("other.gguf", (ff + 32) * used));
  EXPECT_NE(err.find("ffn_gate_exps.weight"), std::string::npos) << err;
}

}  // namespace
}  // namespace lumen
