// `lumen run`: generate text from a prompt, streaming it, then report the timings.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "commands.h"
#include "core/error.h"
#include "engine/generator.h"
#include "engine/sampling_params.h"
#include "model/model.h"
#include "model_options.h"
#include "tokenizer/tokenizer.h"

namespace lumen::cli {

namespace {

struct RunArgs {
  ModelArgs model;
  std::string prompt;
  std::string prompt_file;
  bool has_prompt = false;
  int32_t n_predict = 256;
  float temp = 0.0f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int32_t repeat_last_n = 64;
  int64_t seed = -1;
  std::vector<std::string> logit_bias;
  std::vector<std::string> stop;
  bool json = false;
};

LogitBias parse_bias(const std::string& s) {
  const auto eq = s.find('=');
  if (eq == std::string::npos) fail("--logit-bias '{}': expected ID=BIAS", s);
  LogitBias b;
  try {
    size_t used = 0;
    b.token = std::stoi(s.substr(0, eq), &used);
    if (used != eq) throw std::invalid_argument("id");
    const std::string v = s.substr(eq + 1);
    if (v == "-inf" || v == "-infinity") b.bias = -INFINITY;
    else if (v == "inf" || v == "+inf") b.bias = INFINITY;
    else {
      b.bias = std::stof(v, &used);
      if (used != v.size()) throw std::invalid_argument("bias");
    }
  } catch (const std::logic_error&) {
    fail("--logit-bias '{}': expected ID=BIAS with an integer id and a number or -inf", s);
  }
  return b;
}

void print_timings(const GenerationResult& r, uint64_t seed) {
  const auto& t = r.timings;
  const double prefill_tok_s = t.prefill_ms > 0 ? 1000.0 * r.prompt_tokens.size() / t.prefill_ms : 0.0;
  fmt::print(stderr, "\n\n");
  fmt::print(stderr, "prompt tokens:   {}\n", r.prompt_tokens.size());
  fmt::print(stderr, "generated:       {} tokens (stop: {}, seed {})\n", r.tokens.size(), r.stop_reason, seed);
  fmt::print(stderr, "TTFT:            {:.2f} ms\n", t.ttft_ms);
  fmt::print(stderr, "prefill:         {:.1f} tok/s ({:.2f} ms)\n", prefill_tok_s, t.prefill_ms);
  fmt::print(stderr, "decode:          {:.1f} tok/s ({:.2f} ms)\n", t.decode_tok_s(), t.decode_ms);
  fmt::print(stderr, "ITL:             mean {:.3f} ms, p50 {:.3f} ms, p99 {:.3f} ms\n", t.itl_mean(), t.itl_percentile(50), t.itl_percentile(99));
}

nlohmann::json to_json(const GenerationResult& r, uint64_t seed) {
  const auto& t = r.timings;
  nlohmann::json j;
  j["prompt_tokens"] = r.prompt_tokens;
  j["tokens"] = r.tokens;
  // dump() below replaces invalid UTF-8; the streamed text is already valid.
  j["text"] = r.text;
  j["stop_reason"] = r.stop_reason;
  j["seed"] = seed;
  j["timings"] = {
      {"tokenize_ms", t.tokenize_ms},
      {"prefill_ms", t.prefill_ms},
      {"ttft_ms", t.ttft_ms},
      {"prefill_tok_s", t.prefill_ms > 0 ? 1000.0 * r.prompt_tokens.size() / t.prefill_ms : 0.0},
      {"decode_ms", t.decode_ms},
      {"decode_tok_s", t.decode_tok_s()},
      {"itl_ms_mean", t.itl_mean()},
      {"itl_ms_p50", t.itl_percentile(50)},
      {"itl_ms_p99", t.itl_percentile(99)},
      {"total_ms", t.total_ms},
  };
  return j;
}

}  // namespace

void register_run(CLI::App& app) {
  static RunArgs a;
  auto* cmd = app.add_subcommand("run", "generate text from a prompt (reads prompts line by line from stdin when none is given)");
  a.model.add_to(cmd);
  static CLI::Option* prompt_opt = cmd->add_option("-p,--prompt", a.prompt, "prompt text");
  cmd->add_option("-f,--file", a.prompt_file, "read the prompt from a file");
  cmd->add_option("-n,--n-predict", a.n_predict, "most tokens to generate (-1: until end of text or context; default 256)");
  cmd->add_option("--temp", a.temp, "temperature (0 = greedy argmax; default 0)");
  cmd->add_option("--top-k", a.top_k, "top-k (0 = off; default 40)");
  cmd->add_option("--top-p", a.top_p, "top-p (1 = off; default 0.95)");
  cmd->add_option("--min-p", a.min_p, "min-p (0 = off; default 0.05)");
  cmd->add_option("--repeat-penalty", a.repeat_penalty, "repetition penalty (1 = off)");
  cmd->add_option("--repeat-last-n", a.repeat_last_n, "tokens the penalties look back over (default 64, -1 = all)");
  cmd->add_option("--frequency-penalty", a.frequency_penalty, "frequency penalty (0 = off)");
  cmd->add_option("--presence-penalty", a.presence_penalty, "presence penalty (0 = off)");
  cmd->add_option("--seed", a.seed, "RNG seed (default: random)");
  cmd->add_option("--logit-bias", a.logit_bias, "ID=BIAS added to a token's logit (BIAS may be -inf); repeatable");
  cmd->add_option("--stop", a.stop, "stop string; repeatable");
  cmd->add_flag("--json", a.json, "print one JSON object instead of streaming text");
  cmd->callback([] {
    SamplingParams p;
    p.temperature = a.temp;
    p.top_k = a.top_k;
    p.top_p = a.top_p;
    p.min_p = a.min_p;
    p.repetition_penalty = a.repeat_penalty;
    p.frequency_penalty = a.frequency_penalty;
    p.presence_penalty = a.presence_penalty;
    p.penalty_last_n = a.repeat_last_n;
    p.max_tokens = a.n_predict;
    p.stop = a.stop;
    for (const auto& s : a.logit_bias) p.logit_bias.push_back(parse_bias(s));
    p.seed = a.seed >= 0 ? static_cast<uint64_t>(a.seed) : std::random_device{}();

    auto m = load_model(a.model);
    p.validate(static_cast<int>(m->model->config().n_vocab));
    Generator gen(*m->model, *m->tokenizer, m->n_ctx);

    auto run_one = [&](const std::string& prompt) {
      if (a.json) {
        GenerationResult r = gen.generate(prompt, p);
        fmt::print("{}\n", to_json(r, p.seed).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        return;
      }
      fmt::print("{}", prompt);
      std::fflush(stdout);
      GenerationResult r = gen.generate(prompt, p, [](std::string_view s) {
        std::fwrite(s.data(), 1, s.size(), stdout);
        std::fflush(stdout);
      });
      print_timings(r, p.seed);
    };

    if (!a.prompt_file.empty()) {
      std::ifstream in(a.prompt_file, std::ios::binary);
      if (!in) fail("{}: cannot read the prompt file", a.prompt_file);
      std::stringstream ss;
      ss << in.rdbuf();
      run_one(ss.str());
    } else if (prompt_opt->count() > 0) {
      run_one(a.prompt);
    } else {
      std::string line;
      while (std::getline(std::cin, line)) {
        run_one(line);
        if (!a.json) fmt::print("\n");
      }
    }
  });
}

}  // namespace lumen::cli
