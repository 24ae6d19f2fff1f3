// `lumen serve`: the OpenAI-compatible HTTP server. The listening socket opens first (so
// /health answers 503 while the model loads), then the model and the engine; SIGINT/SIGTERM
// stop accepting, let what runs finish (cancelling it after --shutdown-timeout) and exit 0.
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "commands.h"
#include "core/error.h"
#include "engine/engine_core.h"
#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model_options.h"
#include "server/api_server.h"
#include "server/chat_prompt.h"
#include "server/web_assets.h"
#include "server/http_server.h"
#include "tokenizer/tokenizer.h"

namespace lumen::cli {

namespace {

struct ServeArgs {
  ModelArgs model;
  EngineArgs engine;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string model_alias;
  std::string chat_template;
  std::string max_body = "8MiB";
  double timeout_s = 30;
  int64_t max_connections = 512;
  int http_threads = 2;
  int64_t max_queue = 1024;
  double shutdown_timeout_s = 30;
  bool no_webui = false;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void serve(const ServeArgs& a) {
  // Every thread started from here on inherits the mask: SIGINT/SIGTERM reach only sigtimedwait.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const std::string path = a.model.resolved_model_path();
  if (!std::filesystem::exists(path)) fail("{}: no such model file (give one with -m or $LUMEN_MODEL)", path);
  std::string stem = std::filesystem::path(path).filename().string();
  if (stem.size() > 5 && stem.ends_with(".gguf")) stem.resize(stem.size() - 5);

  server::ApiConfig cfg;
  cfg.model_name = a.model_alias.empty() ? stem : a.model_alias;
  cfg.model_names = {cfg.model_name, stem, std::filesystem::path(path).filename().string(), path};
  cfg.api_key = a.api_key;
  if (cfg.api_key.empty())
    if (const char* k = std::getenv("LUMEN_API_KEY")) cfg.api_key = k;
  cfg.webui = !a.no_webui;
  server::HttpLimits limits;
  limits.max_body_bytes = static_cast<size_t>(parse_memory_size(a.max_body));
  if (!(a.timeout_s > 0)) fail("--timeout must be positive");
  limits.timeout_s = a.timeout_s;
  if (a.max_connections < 1) fail("--max-connections must be at least 1");
  limits.max_connections = static_cast<size_t>(a.max_connections);
  if (a.http_threads < 1) fail("--threads-http must be at least 1");
  limits.threads = a.http_threads;
  if (a.max_queue < 1) fail("--max-queue must be at least 1");

  server::ApiServer api(cfg);
  server::HttpServer http(
      limits, [&api](const server::HttpRequest& r) { return api.handle(r); },
      [&api](int status, const std::string& msg) { return api.error_response(status, msg); },
      [&api](int status) { api.metrics().record_http_status(status); });
  const int port = http.listen(a.host, a.port);
  http.start();
  fmt::print(stderr, "lumen: listening on http://{}:{} (loading {})\n", a.host, port, path);
  if (cfg.webui && !server::web_assets().empty()) fmt::print(stderr, "lumen: web page at http://{}:{}/\n", a.host, port);
  std::fflush(stderr);

  std::unique_ptr<LoadedModel> m;
  std::unique_ptr<LoadedModel> draft;  // declared before the engine: destroyed after it
  std::unique_ptr<EngineCore> engine;
  std::atomic<bool> loaded{false};
  std::string load_error;
  std::thread loader([&] {
    try {
      ModelArgs margs = a.model;
      margs.n_batch = std::max(margs.n_batch, a.engine.max_batch_tokens);
      m = load_model(margs);
      if (!a.engine.draft_model.empty()) draft = load_draft_model(a.engine.draft_model, *m);
      EngineConfig ec = a.engine.to_config(m->n_ctx);
      if (draft) ec.draft_model = draft->model.get();
      ec.max_waiting = a.max_queue;
      server::ApiBackend b;
      b.tokenizer = m->tokenizer.get();
      b.n_ctx = m->n_ctx;
      server::ChatSetup chat = server::make_chat_setup(*m->file, *m->tokenizer, a.chat_template);
      b.render_chat = std::move(chat.render);
      b.bos_token = chat.bos_token;
      b.eos_token = chat.eos_token;
      b.tool_format = chat.tool_format;
      engine = std::make_unique<EngineCore>(*m->model, *m->tokenizer, ec);
      b.engine = engine.get();
      b.n_ctx = engine->config().n_ctx;
      api.set_ready(std::move(b));
      fmt::print(stderr, "lumen: ready: model '{}', context {} tokens, {} sequences at once, {} KV blocks of {} tokens; chat template: {}\n",
                 cfg.model_name, engine->config().n_ctx, engine->config().max_running, engine->n_blocks(),
                 engine->config().block_size, chat.description);
    } catch (const std::exception& e) {
      load_error = e.what();
    }
    loaded.store(true);
  });

  // Wait for a signal, or for the load to fail.
  int sig = 0;
  bool load_failed = false;
  while (true) {
    timespec ts{0, 100 * 1000 * 1000};
    sig = sigtimedwait(&sigs, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) break;
    if (loaded.load() && !load_error.empty()) {
      load_failed = true;
      break;
    }
  }
  if (load_failed) {
    loader.join();
    http.stop();
    fail("{}", load_error);
  }
  fmt::print(stderr, "lumen: {} received: no new connections; finishing what runs (at most {} s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
             a.shutdown_timeout_s);
  std::fflush(stderr);
  http.stop_accepting();
  api.set_draining();
  if (!loaded.load()) {
    // Still loading: nothing runs yet, and loading cannot be interrupted.
    http.stop();
    std::fflush(stderr);
    std::_Exit(0);
  }
  loader.join();
  const auto t0 = std::chrono::steady_clock::now();
  while (http.open_responses() > 0 && seconds_since(t0) < a.shutdown_timeout_s)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (http.open_responses() > 0)
    fmt::print(stderr, "lumen: cancelling {} responses still running after {} s\n", http.open_responses(), a.shutdown_timeout_s);
  http.stop();  // closes the connections; their pending streams cancel their requests
  engine.reset();
  fmt::print(stderr, "lumen: stopped\n");
}

}  // namespace

void register_serve(CLI::App& app) {
  static ServeArgs a;
  auto* cmd = app.add_subcommand("serve", "serve the model over an OpenAI-compatible HTTP API");
  a.model.add_to(cmd);
  a.engine.decode_stall_factor = 1.75;  // a server protects its streams' inter-token latency
  a.engine.add_to(cmd);
  cmd->add_option("--host", a.host, "address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", a.port, "port to listen on (default 8080; 0 picks a free one)");
  cmd->add_option("--api-key", a.api_key, "require 'Authorization: Bearer KEY' on every route but /health (default $LUMEN_API_KEY)");
  cmd->add_option("--model-alias", a.model_alias, "the model's name in the API (default the file's name without .gguf)");
  cmd->add_option("--chat-template", a.chat_template,
                  "a Jinja chat template file, or 'chatml', instead of the model's tokenizer.chat_template");
  cmd->add_option("--max-body", a.max_body, "largest request body (default 8MiB); larger ones get 413");
  cmd->add_option("--timeout", a.timeout_s, "seconds a request may take to arrive, an idle connection may stay, a write may take (default 30)");
  cmd->add_option("--max-connections", a.max_connections, "most open connections (default 512); more get 503");
  cmd->add_option("--threads-http", a.http_threads, "HTTP I/O threads (default 2)");
  cmd->add_option("--max-queue", a.max_queue, "most requests waiting for the engine (default 1024); more get 429");
  cmd->add_option("--shutdown-timeout", a.shutdown_timeout_s, "on SIGINT/SIGTERM, seconds to let running requests finish (default 30)");
  cmd->add_flag("--no-webui", a.no_webui, "do not serve the web page at / (the API alone)");
  cmd->callback([] { serve(a); });
}

}  // namespace lumen::cli
