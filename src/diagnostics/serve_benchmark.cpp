#include "diagnostics/serve_benchmark.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/stats.h"

namespace lumen {

namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

struct Url {
  std::string host, port;
};

Url parse_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) fail("--url '{}': expected http://HOST:PORT", url);
  std::string rest = url.substr(scheme.size());
  if (const auto slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  Url u;
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos) {
    u.host = rest;
    u.port = "80";
  } else {
    u.host = rest.substr(0, colon);
    u.port = rest.substr(colon + 1);
  }
  if (u.host.empty() || u.port.empty()) fail("--url '{}': expected http://HOST:PORT", url);
  return u;
}

// One keep-alive connection, blocking, with a receive timeout.
class Client {
 public:
  Client(const Url& url, std::string api_key, double timeout_s) : url_(url), key_(std::move(api_key)), timeout_s_(timeout_s) {}

  // A whole response: status and body.
  std::pair<int, std::string> call(http::verb verb, const std::string& target, const std::string& body) {
    send(verb, target, body);
    http::response_parser<http::string_body> p;
    p.body_limit(64u << 20);
    http::read(sock_, buf_, p);
    finish(p.get().keep_alive());
    return {static_cast<int>(p.get().result_int()), p.get().body()};
  }

  // A streamed response: on_data(payload, arrival time) for each `data:` event. Returns the
  // status; a non-200 body lands in *error_body.
  int stream(const std::string& target, const std::string& body, const std::function<void(std::string_view, Clock::time_point)>& on_data,
             std::string* error_body) {
    send(http::verb::post, target, body);
    http::response_parser<http::string_body> p;
    p.body_limit(64u << 20);
    std::string pending;
    auto on_chunk = [&](std::uint64_t, auto data, boost::system::error_code&) -> std::size_t {
      const auto now = Clock::now();
      pending.append(data.data(), data.size());
      size_t end;
      while ((end = pending.find("\n\n")) != std::string::npos) {
        std::string_view ev(pending.data(), end);
        if (ev.rfind("data: ", 0) == 0) on_data(ev.substr(6), now);
        pending.erase(0, end + 2);
      }
      return data.size();
    };
    p.on_chunk_body(on_chunk);
    http::read_header(sock_, buf_, p);
    const int status = static_cast<int>(p.get().result_int());
    while (!p.is_done()) http::read_some(sock_, buf_, p);
    if (status != 200 && error_body) *error_body = p.get().body() + pending;
    finish(p.get().keep_alive());
    return status;
  }

 private:
  void send(http::verb verb, const std::string& target, const std::string& body) {
    if (!open_) {
      tcp::resolver resolver(ioc_);
      sock_ = tcp::socket(ioc_);
      net::connect(sock_, resolver.resolve(url_.host, url_.port));
      timeval tv{static_cast<time_t>(timeout_s_), static_cast<suseconds_t>((timeout_s_ - static_cast<double>(static_cast<time_t>(timeout_s_))) * 1e6)};
      setsockopt(sock_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      sock_.set_option(tcp::no_delay(true));
      buf_.clear();
      open_ = true;
    }
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, url_.host);
    req.set(http::field::user_agent, "lumen-bench");
    if (!key_.empty()) req.set(http::field::authorization, "Bearer " + key_);
    if (verb == http::verb::post) req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    req.keep_alive(true);
    try {
      http::write(sock_, req);
    } catch (...) {
      open_ = false;
      throw;
    }
  }
  void finish(bool keep_alive) {
    if (!keep_alive) {
      boost::system::error_code ignored;
      sock_.close(ignored);
      open_ = false;
    }
  }

  Url url_;
  std::string key_;
  double timeout_s_;
  net::io_context ioc_;
  tcp::socket sock_{ioc_};
  boost::beast::flat_buffer buf_;
  bool open_ = false;
};

struct Outcome {
  bool ok = false;
  std::string error;
  double ttft_ms = 0, e2e_ms = 0;
  std::vector<double> itl_ms;
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

Outcome run_one(Client& client, const std::string& model, const std::vector<int32_t>& prompt, int64_t gen_len) {
  Outcome o;
  const Json body{{"model", model},         {"prompt", prompt},   {"max_tokens", gen_len},
                  {"temperature", 0},       {"ignore_eos", true}, {"stream", true},
                  {"stream_options", {{"include_usage", true}}}};
  const auto t0 = Clock::now();
  bool got_first = false;
  Clock::time_point last;
  std::string err;
  try {
    const int status = client.stream("/v1/completions", body.dump(),
                                     [&](std::string_view data, Clock::time_point at) {
                                       if (data == "[DONE]") return;
                                       const Json j = Json::parse(data, nullptr, false);
                                       if (j.is_discarded()) return;
                                       if (j.contains("error")) {
                                         err = j["error"].value("message", "error event");
                                         return;
                                       }
                                       if (j.contains("usage") && j["usage"].is_object()) {
                                         const Json& u = j["usage"];
                                         o.prompt_tokens = u.value("prompt_tokens", 0);
                                         o.completion_tokens = u.value("completion_tokens", 0);
                                         if (u.contains("prompt_tokens_details"))
                                           o.cached_tokens = u["prompt_tokens_details"].value("cached_tokens", 0);
                                       }
                                       if (!j.contains("choices") || j["choices"].empty()) return;
                                       const std::string text = j["choices"][0].value("text", "");
                                       if (text.empty()) return;
                                       if (!got_first) {
                                         o.ttft_ms = ms_between(t0, at);
                                         got_first = true;
                                       } else {
                                         o.itl_ms.push_back(ms_between(last, at));
                                       }
                                       last = at;
                                     },
                                     &err);
    o.e2e_ms = ms_between(t0, Clock::now());
    if (status != 200) o.error = fmt::format("HTTP {}: {}", status, err);
    else if (!err.empty()) o.error = err;
    else o.ok = true;
  } catch (const std::exception& e) {
    o.error = e.what();
  }
  return o;
}

ServeBenchResult::Dist dist(std::vector<double> v) {
  ServeBenchResult::Dist d;
  if (v.empty()) return d;
  double sum = 0;
  for (double x : v) sum += x;
  d.mean = sum / static_cast<double>(v.size());
  d.p50 = percentile(v, 50);
  d.p90 = percentile(v, 90);
  d.p99 = percentile(v, 99);
  return d;
}

}  // namespace

std::vector<ServeBenchResult> run_serve_benchmark(const ServeBenchConfig& c, const std::vector<int>& concurrency,
                                                  const std::function<void(int, int64_t, int64_t)>& progress) {
  if (c.prompt_len < 1 || c.gen_len < 1) fail("--prompt-len and --gen-len must be at least 1");
  if (c.shared_prefix < 0 || c.shared_prefix > c.prompt_len) fail("--shared-prefix must be in [0, --prompt-len]");
  for (int n : concurrency)
    if (n < 1) fail("--concurrency values must be at least 1");
  const Url url = parse_url(c.url);
  Client probe(url, c.api_key, c.timeout_s);

  // The model and its context.
  auto [st, models] = probe.call(http::verb::get, "/v1/models", "");
  if (st != 200) fail("{}/v1/models answered HTTP {}: {}", c.url, st, models);
  const Json mj = Json::parse(models, nullptr, false);
  if (mj.is_discarded() || !mj.contains("data") || mj["data"].empty()) fail("{}/v1/models: no model listed", c.url);
  const std::string model = c.model.empty() ? mj["data"][0].value("id", "") : c.model;
  const int64_t max_len = mj["data"][0].value("max_model_len", int64_t{0});
  if (max_len > 0 && c.prompt_len + c.gen_len > max_len)
    fail("--prompt-len {} + --gen-len {} exceed the server's context of {} tokens", c.prompt_len, c.gen_len, max_len);

  // Token ids of the server's own vocabulary, from a fixed text.
  const std::string text =
      "The quick brown fox jumps over the lazy dog while a little girl named Lily watched the sun rise over the "
      "green hills. Engineers measure latency, throughput and memory; models read every weight once per step. "
      "Once upon a time there was a small town by the sea where people told stories about ships, stars and bread.";
  auto [ts, tok] = probe.call(http::verb::post, "/tokenize", Json{{"content", text}, {"add_special", false}}.dump());
  if (ts != 200) fail("{}/tokenize answered HTTP {}: {}", c.url, ts, tok);
  std::set<int32_t> distinct;
  const Json tj = Json::parse(tok, nullptr, false);
  if (tj.is_discarded() || !tj.contains("tokens")) fail("{}/tokenize: unexpected answer {}", c.url, tok);
  for (const auto& id : tj["tokens"]) distinct.insert(id.get<int32_t>());
  if (distinct.empty()) fail("{}/tokenize gave no tokens", c.url);
  const std::vector<int32_t> ids(distinct.begin(), distinct.end());
  std::mt19937_64 rng(c.seed);
  auto random_tokens = [&](int64_t n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = ids[rng() % ids.size()];
    return v;
  };
  const std::vector<int32_t> prefix = random_tokens(c.shared_prefix);

  // Warm-up: loads the weights into the caches and the pages of the KV pool.
  {
    Outcome w = run_one(probe, model, random_tokens(c.prompt_len), std::min<int64_t>(c.gen_len, 8));
    if (!w.ok) fail("the warm-up request failed: {}", w.error);
  }

  std::vector<ServeBenchResult> results;
  for (int conc : concurrency) {
    const int64_t n_req = c.requests > 0 ? c.requests : std::max<int64_t>(8, 2 * conc);
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(n_req));
    for (auto& p : prompts) {
      p = prefix;
      const auto tail = random_tokens(c.prompt_len - c.shared_prefix);
      p.insert(p.end(), tail.begin(), tail.end());
    }
    std::vector<Outcome> outcomes(static_cast<size_t>(n_req));
    std::atomic<int64_t> next{0}, done{0};
    std::mutex progress_mu;
    const auto t0 = Clock::now();
    std::vector<std::thread> workers;
    for (int w = 0; w < conc; w++) {
      workers.emplace_back([&] {
        Client client(url, c.api_key, c.timeout_s);
        for (int64_t i; (i = next++) < n_req;) {
          outcomes[static_cast<size_t>(i)] = run_one(client, model, prompts[static_cast<size_t>(i)], c.gen_len);
          const int64_t d = ++done;
          if (progress) {
            std::lock_guard lock(progress_mu);
            progress(conc, d, n_req);
          }
        }
      });
    }
    for (auto& t : workers) t.join();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();

    ServeBenchResult r;
    r.concurrency = conc;
    r.requests = n_req;
    r.duration_s = secs;
    std::vector<double> ttft, itl, e2e;
    for (const Outcome& o : outcomes) {
      if (!o.ok) {
        if (r.errors++ == 0) r.first_error = o.error;
        continue;
      }
      ttft.push_back(o.ttft_ms);
      e2e.push_back(o.e2e_ms);
      itl.insert(itl.end(), o.itl_ms.begin(), o.itl_ms.end());
      r.prompt_tokens += o.prompt_tokens;
      r.generated_tokens += o.completion_tokens;
      r.cached_tokens += o.cached_tokens;
    }
    r.requests_per_s = secs > 0 ? static_cast<double>(n_req - r.errors) / secs : 0;
    r.output_tok_s = secs > 0 ? static_cast<double>(r.generated_tokens) / secs : 0;
    r.ttft_ms = dist(ttft);
    r.itl_ms = dist(itl);
    r.e2e_ms = dist(e2e);
    results.push_back(r);
  }
  return results;
}

}  // namespace lumen
