// `lumen run`: generate text from a prompt, streaming it, then report the timings.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <functional>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "commands.h"
#include "core/error.h"
#include "core/text_file.h"
#include "engine/engine_core.h"
#include "engine/sampling_params.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "model/model.h"
#include "engine_options.h"
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
  std::string grammar_file;      // --grammar: GBNF-style text (grammar/grammar.h)
  std::string json_schema_file;  // --json-schema: a JSON Schema (grammar/json_schema.h)
  bool json = false;
  bool escape = false;             // -e: \n, \t, \\, \xHH... in -p are turned into their characters
  bool no_display_prompt = false;  // text mode prints only the generation
  bool ignore_eos = false;
  EngineArgs engine;
};

// llama.cpp's -e: the escapes a shell makes awkward to type. An unknown escape is kept as typed.
std::string process_escapes(const std::string& in) {
  std::string out;
  for (size_t i = 0; i < in.size(); i++) {
    if (in[i] != '\\' || i + 1 == in.size()) {
      out += in[i];
      continue;
    }
    const char c = in[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '"': out += '"'; break;
      case '\'': out += '\''; break;
      case 'x':
        if (i + 2 < in.size() && std::isxdigit(static_cast<unsigned char>(in[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(in[i + 2]))) {
          out += static_cast<char>(std::stoi(in.substr(i + 1, 2), nullptr, 16));
          i += 2;
          break;
        }
        [[fallthrough]];
      default: out += '\\'; out += c;
    }
  }
  return out;
}

// SamplingParams::validate names its fields; the command line names its flags.
[[noreturn]] void rethrow_in_flag_names(const Error& e) {
  static const std::pair<const char*, const char*> names[] = {
      {"sampling: temperature", "--temp"},           {"sampling: top_k", "--top-k"},
      {"sampling: top_p", "--top-p"},                {"sampling: min_p", "--min-p"},
      {"sampling: repetition_penalty", "--repeat-penalty"}, {"sampling: frequency_penalty", "--frequency-penalty"},
      {"sampling: presence_penalty", "--presence-penalty"}, {"sampling: penalty_last_n", "--repeat-last-n"},
      {"sampling: logit_bias", "--logit-bias"},      {"sampling: stop string", "--stop string"},
      {"sampling: max_tokens", "-n/--n-predict"},
  };
  const std::string msg = e.what();
  for (const auto& [field, flag] : names)
    if (msg.rfind(field, 0) == 0) usage_fail("{}{}", flag, msg.substr(std::string(field).size()));
  throw e;
}

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

// One prompt's generation as `run` reports it.
struct RunResult {
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> tokens;
  std::string text;
  std::string stop_reason;  // "eog", "stop", "length", "cancelled" or "error"
  std::string error;
  RequestTimings timings;
};

// Drains a request's stream, passing text to on_text as it comes.
RunResult collect(RequestHandle& h, std::vector<int32_t> prompt, const std::function<void(std::string_view)>& on_text) {
  RunResult r;
  r.prompt_tokens = std::move(prompt);
  while (auto e = h.next()) {
    if (e->token >= 0) r.tokens.push_back(e->token);
    if (!e->text.empty()) {
      r.text += e->text;
      if (on_text) on_text(e->text);
    }
    if (e->finished) {
      r.stop_reason = finish_reason_name(e->finish_reason);
      r.error = e->error;
      r.timings = e->timings;
    }
  }
  return r;
}

double prefill_tok_s(const RunResult& r) {
  const double ms = r.timings.prefill_ms();
  const double computed = static_cast<double>(r.timings.prompt_tokens - r.timings.cached_prompt_tokens);
  return ms > 0 ? 1000.0 * computed / ms : 0.0;
}

void print_timings(const RunResult& r, uint64_t seed) {
  const auto& t = r.timings;
  fmt::print(stderr, "\n\n");
  fmt::print(stderr, "prompt tokens:   {} ({} cached)\n", r.prompt_tokens.size(), t.cached_prompt_tokens);
  fmt::print(stderr, "generated:       {} tokens (stop: {}, seed {})\n", r.tokens.size(), r.stop_reason, seed);
  fmt::print(stderr, "queue:           {:.2f} ms\n", t.queue_ms);
  fmt::print(stderr, "TTFT:            {:.2f} ms\n", t.ttft_ms);
  fmt::print(stderr, "prefill:         {:.1f} tok/s ({:.2f} ms)\n", prefill_tok_s(r), t.prefill_ms());
  fmt::print(stderr, "decode:          {:.1f} tok/s ({:.2f} ms)\n", t.decode_tok_s(), t.decode_ms());
  fmt::print(stderr, "ITL:             mean {:.3f} ms, p50 {:.3f} ms, p99 {:.3f} ms\n", t.itl_mean(), t.itl_percentile(50), t.itl_percentile(99));
  if (t.spec_on())
    fmt::print(stderr, "speculative:     {} drafts, {} accepted ({:.1f}%), {:.2f} tokens per target pass\n", t.spec_proposed,
               t.spec_accepted, 100.0 * t.spec_acceptance_rate(), t.spec_tokens_per_pass());
}

// Per draft position: the share of the drafts at that position that were accepted.
nlohmann::json spec_rates(const RequestTimings& t) {
  nlohmann::json a = nlohmann::json::array();
  for (size_t i = 0; i < t.spec_proposed_at.size(); i++)
    a.push_back(t.spec_proposed_at[i] > 0 ? static_cast<double>(t.spec_accepted_at[i]) / static_cast<double>(t.spec_proposed_at[i]) : 0.0);
  return a;
}

nlohmann::json to_json(const RunResult& r, uint64_t seed) {
  const auto& t = r.timings;
  nlohmann::json j;
  j["prompt_tokens"] = r.prompt_tokens;
  j["tokens"] = r.tokens;
  // dump() below replaces invalid UTF-8; the streamed text is already valid.
  j["text"] = r.text;
  j["stop_reason"] = r.stop_reason;
  if (!r.error.empty()) j["error"] = r.error;
  j["seed"] = seed;
  j["timings"] = {
      {"queue_ms", t.queue_ms},
      {"prefill_ms", t.prefill_ms()},
      {"ttft_ms", t.ttft_ms},
      {"prefill_tok_s", prefill_tok_s(r)},
      {"decode_ms", t.decode_ms()},
      {"decode_tok_s", t.decode_tok_s()},
      {"itl_ms_mean", t.itl_mean()},
      {"itl_ms_p50", t.itl_percentile(50)},
      {"itl_ms_p99", t.itl_percentile(99)},
      {"total_ms", t.total_ms},
      {"prompt_tokens", t.prompt_tokens},
      {"cached_prompt_tokens", t.cached_prompt_tokens},
      {"preemptions", t.preemptions},
  };
  if (t.spec_on())
    j["timings"]["spec"] = {{"proposed", t.spec_proposed},
                            {"accepted", t.spec_accepted},
                            {"acceptance_rate", t.spec_acceptance_rate()},
                            {"tokens_per_target_pass", t.spec_tokens_per_pass()},
                 {"acceptance_rate_per_position", spec_rates(t)}};
  return j;
}

}  // namespace

void register_run(CLI::App& app) {
  static RunArgs a;
  auto* cmd = app.add_subcommand("run", "generate text from a prompt (reads prompts line by line from stdin when none is given)");
  a.model.add_to(cmd);
  static CLI::Option* prompt_opt = cmd->add_option("-p,--prompt", a.prompt, "prompt text");
  cmd->add_option("-f,--file", a.prompt_file, "read the prompt from a file")->excludes(prompt_opt);
  cmd->add_flag("-e,--escape", a.escape, "turn \\n, \\t, \\\\, \\\", \\xHH in -p into their characters");
  cmd->add_flag("--no-display-prompt", a.no_display_prompt, "print only the generated text, not the prompt before it");
  cmd->add_flag("--ignore-eos", a.ignore_eos, "keep generating past end-of-generation tokens (until -n or the context)");
  cmd->add_option("-n,--n-predict", a.n_predict, "tokens to generate at most (-1: until end of text or context; 0: none; default 256)");
  cmd->add_option("--temp", a.temp, "temperature (0 = greedy argmax; default 0)");
  cmd->add_option("--top-k", a.top_k, "top-k (0 = off; default 40)");
  cmd->add_option("--top-p", a.top_p, "top-p (1 = off; default 0.95)");
  cmd->add_option("--min-p", a.min_p, "min-p (0 = off; default 0.05)");
  cmd->add_option("--repeat-penalty", a.repeat_penalty, "repetition penalty (1 = off)");
  cmd->add_option("--repeat-last-n", a.repeat_last_n, "tokens the penalties look back over (default 64, -1 = all)");
  cmd->add_option("--frequency-penalty", a.frequency_penalty, "frequency penalty (0 = off)");
  cmd->add_option("--presence-penalty", a.presence_penalty, "presence penalty (0 = off)");
  cmd->add_option("-s,--seed", a.seed, "RNG seed (default: random)");
  // One value per occurrence (a later word is the prompt's, not another stop); repeat the flag.
  cmd->add_option("--logit-bias", a.logit_bias, "ID=BIAS added to a token's logit (BIAS may be -inf); repeat for more")
      ->expected(1)->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--stop,-r,--reverse-prompt", a.stop, "stop string (llama.cpp: -r/--reverse-prompt); repeat for more")
      ->expected(1)->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  auto* grammar_opt =
      cmd->add_option("--grammar", a.grammar_file, "constrain the output to the grammar in FILE (GBNF-style text, README \"Grammars\")");
  cmd->add_option("--json-schema", a.json_schema_file, "constrain the output to JSON valid under the JSON Schema in FILE")
      ->excludes(grammar_opt);
  cmd->add_flag("--json", a.json, "print one JSON object per prompt instead of streaming text");
  a.engine.add_to(cmd);
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
    if (a.n_predict < -1) usage_fail("-n/--n-predict must be >= -1 (-1 = no limit), got {}", a.n_predict);
    const std::string prompt_text = a.escape ? process_escapes(a.prompt) : a.prompt;
    p.seed = a.seed >= 0 ? static_cast<uint64_t>(a.seed) : std::random_device{}();
    if (!a.grammar_file.empty()) p.grammar = compile_grammar(read_whole_file(a.grammar_file));
    if (!a.json_schema_file.empty()) {
      nlohmann::ordered_json schema;
      try {
        schema = nlohmann::ordered_json::parse(read_whole_file(a.json_schema_file));
      } catch (const nlohmann::json::parse_error& e) {
        fail("--json-schema {}: not JSON: {}", a.json_schema_file, e.what());
      }
      try {
        p.grammar = compile_grammar(json_schema_to_grammar(schema));
      } catch (const GrammarError& e) {
        fail("--json-schema {}: {}", a.json_schema_file, e.what());
      }
    }

    // Input files are read before the model loads: a wrong path fails at once.
    const std::string file_text = a.prompt_file.empty() ? "" : read_whole_file(a.prompt_file);
    ModelArgs margs = a.model;
    margs.n_batch = std::max(margs.n_batch, a.engine.max_batch_tokens);
    auto m = load_model(margs);
    try {
      p.validate(static_cast<int>(m->model->config().n_vocab));
    } catch (const Error& e) {
      rethrow_in_flag_names(e);
    }
    const auto draft = a.engine.draft_model.empty() ? nullptr : load_draft_model(a.engine.draft_model, *m);
    EngineConfig ec = a.engine.to_config(m->n_ctx);
    if (draft) ec.draft_model = draft->model.get();
    EngineCore engine(*m->model, *m->tokenizer, ec);
    GenerationParams gp;
    gp.sampling = p;
    gp.ignore_eos = a.ignore_eos;
    bool failed = false;

    // Prompts are submitted ahead (at most a few windows of --parallel) and reported in input
    // order; the head of the line streams while the others run beside it.
    struct Pending {
      std::string prompt;
      std::vector<int32_t> tokens;
      std::shared_ptr<RequestHandle> handle;
      std::string error;
      bool nothing_to_generate = false;  // -n 0: the prompt is tokenized and checked, nothing runs
    };
    std::deque<Pending> pending;
    auto report = [&](Pending& q) {
      if (q.nothing_to_generate) {
        RunResult r;
        r.prompt_tokens = std::move(q.tokens);
        r.stop_reason = "length";
        if (a.json) {
          fmt::print("{}\n", to_json(r, p.seed).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        } else {
          if (!a.no_display_prompt) fmt::print("{}", q.prompt);
          std::fflush(stdout);
          fmt::print(stderr, "\n\nprompt tokens:   {}\ngenerated:       0 tokens (-n 0)\n", r.prompt_tokens.size());
        }
        return;
      }
      if (!q.handle) {
        failed = true;
        if (a.json) {
          nlohmann::json j;
          j["prompt"] = q.prompt;
          j["error"] = q.error;
          fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        } else {
          fmt::print(stderr, "error: {}\n", q.error);
        }
        return;
      }
      if (a.json) {
        RunResult r = collect(*q.handle, std::move(q.tokens), {});
        failed |= !r.error.empty();
        fmt::print("{}\n", to_json(r, p.seed).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        std::fflush(stdout);
        return;
      }
      if (!a.no_display_prompt) fmt::print("{}", q.prompt);
      std::fflush(stdout);
      RunResult r = collect(*q.handle, std::move(q.tokens), [](std::string_view s) {
        std::fwrite(s.data(), 1, s.size(), stdout);
        std::fflush(stdout);
      });
      if (!r.error.empty()) {
        failed = true;
        fmt::print(stderr, "\nerror: {}\n", r.error);
      }
      print_timings(r, p.seed);
    };
    auto submit = [&](const std::string& prompt) {
      Pending q;
      q.prompt = prompt;
      try {
        q.tokens = m->tokenizer->encode(prompt, /*add_special=*/true, /*parse_special=*/true);
        if (q.tokens.empty()) fail("the prompt is empty and the vocabulary adds no BOS token");
        if (gp.sampling.max_tokens == 0) {
          // Nothing to generate; the prompt must still fit the context, as it would have to.
          if (static_cast<int64_t>(q.tokens.size()) > engine.max_sequence_tokens())
            fail("the prompt has {} tokens, more than the context of {} tokens (-c)", q.tokens.size(),
                 engine.max_sequence_tokens());
          q.nothing_to_generate = true;
          pending.push_back(std::move(q));
          return;
        }
        GenerationParams one = gp;
        // -n is a most, as in llama.cpp: generation also ends (length) where the context does.
        // A prompt that leaves no room at all is still refused by the engine.
        const int64_t room = engine.max_sequence_tokens() - static_cast<int64_t>(q.tokens.size());
        if (one.sampling.max_tokens > 0 && room >= 1)
          one.sampling.max_tokens = static_cast<int32_t>(std::min<int64_t>(one.sampling.max_tokens, room));
        q.handle = engine.submit(q.tokens, one);
      } catch (const Error& e) {
        q.error = e.what();
      }
      pending.push_back(std::move(q));
    };
    const size_t window = static_cast<size_t>(std::max<int64_t>(4, 2 * a.engine.parallel));
    // Reports the oldest prompts until at most `keep` are in flight; stdin generations are
    // separated by a newline in text mode.
    bool first = true;
    auto report_until = [&](size_t keep, bool separate) {
      while (pending.size() > keep) {
        if (separate && !first && !a.json) fmt::print("\n");
        first = false;
        report(pending.front());
        pending.pop_front();
      }
    };

    if (!a.prompt_file.empty() || prompt_opt->count() > 0) {
      // One prompt: a prompt that is too long or cannot be tokenized is the command's error,
      // reported before anything is echoed.
      submit(!a.prompt_file.empty() ? file_text : prompt_text);
      if (!pending.front().handle && !pending.front().nothing_to_generate) throw Error(pending.front().error);
      report_until(0, false);
    } else {
      std::string line;
      while (std::getline(std::cin, line)) {
        submit(line);
        report_until(window, true);
      }
      report_until(0, true);
      if (!a.json) fmt::print("\n");
    }
    if (failed) fail("some prompts failed (see above)");
  });
}

}  // namespace lumen::cli
