#include "server/http_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cctype>
#include <mutex>
#include <optional>
#include <thread>

#include "core/error.h"

namespace lumen::server {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

std::string HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers)
    if (k == lower_name) return v;
  return {};
}

namespace {

std::string reason_phrase(int status) {
  const auto r = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)));
  return r.empty() ? std::string("Unknown") : std::string(r);
}

// The status line and headers of a response (with the blank line that ends them).
std::string format_head(int status, const std::string& content_type, const std::vector<std::pair<std::string, std::string>>& extra,
                        std::optional<size_t> content_length, bool keep_alive) {
  std::string h = fmt::format("HTTP/1.1 {} {}\r\nServer: lumen\r\n", status, reason_phrase(status));
  if (!content_type.empty()) h += fmt::format("Content-Type: {}\r\n", content_type);
  for (const auto& [k, v] : extra) h += fmt::format("{}: {}\r\n", k, v);
  if (content_length) h += fmt::format("Content-Length: {}\r\n", *content_length);
  else h += "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return h;
}

std::string chunk(std::string_view data) {
  if (data.empty()) return {};
  std::string c = fmt::format("{:x}\r\n", data.size());
  c += data;
  c += "\r\n";
  return c;
}

}  // namespace

struct HttpServer::Impl {
  HttpLimits limits;
  HttpHandler handler;
  HttpErrorResponder error_response;
  std::function<void(int)> on_status;
  // Destroyed in stop(), which destroys the handlers still queued and with them their sessions
  // (cancelling their streams) while this Impl, which they point to, is alive.
  std::unique_ptr<net::io_context> ioc = std::make_unique<net::io_context>();
  // On a strand: accepting and stop_accepting()'s close run on different I/O threads otherwise.
  std::unique_ptr<tcp::acceptor> acceptor = std::make_unique<tcp::acceptor>(net::make_strand(*ioc));
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::atomic<size_t> n_connections{0};
  std::atomic<size_t> n_open_responses{0};
  // Producers (the engine thread) post drains into the I/O context only through this gate, which
  // stop() closes before the context goes away.
  struct PostGate {
    std::mutex mu;
    bool open = true;
  };
  std::shared_ptr<PostGate> gate = std::make_shared<PostGate>();

  void accept();
  void report(int status) {
    if (on_status) on_status(status);
  }
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::Impl* srv, tcp::socket sock)
      : srv_(srv), sock_(std::move(sock)), timer_(sock_.get_executor()) {}

  ~Session() {
    if (stream_) {
      stream_->cancel();
      srv_->n_open_responses--;
    }
    srv_->n_connections--;
  }

  void start() {
    if (srv_->n_connections.load() > srv_->limits.max_connections)
      return refuse(503, "too many connections; try again later");
    read_request();
  }

 private:
  using Parser = http::request_parser<http::string_body>;

  std::chrono::steady_clock::duration timeout() const {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(srv_->limits.timeout_s));
  }

  // One deadline at a time (receiving a request, or sending one write): when it passes, the
  // socket is closed and whatever is pending on it fails.
  void arm(std::chrono::steady_clock::duration d) {
    timer_.expires_after(d);
    timer_.async_wait([self = shared_from_this(), gen = ++timer_gen_](error_code ec) {
      if (ec || gen != self->timer_gen_) return;
      self->timed_out_ = true;
      error_code ignored;
      // A write that does not drain: the client is gone or hostile, close. A request that does
      // not arrive: cancel the read, so that it can still be answered 408. cancel() fails only
      // the read pending at that moment: a deadline that lands between two reads of a composed
      // read (the last one's completion queued on the strand, the next not yet started) would
      // be lost, and a slow client never closed (seen once in 64 slow-loris connections on a
      // loaded machine). So it cancels again every 50 ms until the read reports it
      // (on_read_error and on_request disarm).
      if (self->writing_ || self->lingering_) {
        self->sock_.close(ignored);
      } else {
        self->sock_.cancel(ignored);
        self->arm(std::chrono::milliseconds(50));
      }
    });
  }
  void disarm() {
    ++timer_gen_;
    timer_.cancel();
  }

  void read_request() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(srv_->limits.max_header_bytes));
    parser_->body_limit(srv_->limits.max_body_bytes);
    timed_out_ = false;
    arm(timeout());
    http::async_read_header(sock_, buf_, *parser_, [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(error_code ec) {
    if (ec) return on_read_error(ec);
    auto& req = parser_->get();
    // A client that waits for permission to send its body (curl does for large bodies).
    if (req[http::field::expect] == "100-continue" && !parser_->is_done()) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(sock_, net::buffer(kContinue), [self = shared_from_this()](error_code ec, size_t) {
        if (ec) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(sock_, buf_, *parser_, [self = shared_from_this()](error_code ec, size_t) { self->on_request(ec); });
  }

  void on_read_error(error_code ec) {
    disarm();
    if (timed_out_) {
      // Nothing of a next request yet: an idle keep-alive connection, closed quietly.
      if (parser_ && !parser_->got_some()) return;
      return refuse(408, fmt::format("the request did not arrive within {} s", srv_->limits.timeout_s));
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
        ec == net::error::operation_aborted || ec == net::error::bad_descriptor)
      return close();
    if (ec == http::error::body_limit)
      return refuse(413, fmt::format("the request body is larger than the limit of {} bytes", srv_->limits.max_body_bytes));
    if (ec == http::error::header_limit)
      return refuse(431, fmt::format("the request headers are larger than the limit of {} bytes", srv_->limits.max_header_bytes));
    if (ec == http::error::partial_message) return close();  // the client hung up half-way
    refuse(400, fmt::format("malformed HTTP request: {}", ec.message()));
  }

  void on_request(error_code ec) {
    if (ec) return on_read_error(ec);
    disarm();
    auto msg = parser_->release();
    parser_.reset();
    keep_alive_ = msg.keep_alive();
    head_ = msg.method() == http::verb::head;
    HttpRequest req;
    req.method = std::string(msg.method_string());
    const std::string_view target(msg.target().data(), msg.target().size());
    const auto q = target.find('?');
    req.path = std::string(target.substr(0, q));
    if (q != std::string_view::npos) req.query = std::string(target.substr(q + 1));
    for (const auto& f : msg) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      req.headers.emplace_back(std::move(name), std::string(f.value()));
    }
    req.body = std::move(msg.body());

    HttpResponse res;
    try {
      res = srv_->handler(req);
    } catch (const std::exception& e) {
      res = srv_->error_response(500, fmt::format("internal error: {}", e.what()));
    }
    if (res.stream) return begin_stream(std::move(res));
    send_whole(res.status, res.content_type, res.headers, res.body);
  }

  void send_whole(int status, const std::string& type, const std::vector<std::pair<std::string, std::string>>& headers,
                  const std::string& body) {
    srv_->report(status);
    out_ = format_head(status, type, headers, body.size(), keep_alive_);
    if (!head_) out_ += body;  // HEAD: the same headers, no body
    write(out_, [self = shared_from_this()] {
      if (self->keep_alive_) self->read_request();
      else self->linger_close();
    });
  }

  // Refuses with `status` and closes: the request may be half-read, so nothing more on this
  // connection can be trusted.
  void refuse(int status, const std::string& message) {
    keep_alive_ = false;
    const HttpResponse r = srv_->error_response(status, message);
    srv_->report(status);
    out_ = format_head(status, r.content_type, r.headers, r.body.size(), false);
    out_ += r.body;
    write(out_, [self = shared_from_this()] { self->linger_close(); });
  }

  template <class Then>
  void write(const std::string& data, Then then) {
    writing_ = true;
    arm(timeout());
    net::async_write(sock_, net::buffer(data), [self = shared_from_this(), then](error_code ec, size_t) {
      self->writing_ = false;
      self->disarm();
      if (ec) return self->client_gone();
      then();
    });
  }

  // Half-closes and drains what the client still sends for a moment, so that our response is
  // not destroyed by a reset before the client reads it.
  void linger_close() {
    lingering_ = true;
    error_code ignored;
    sock_.shutdown(tcp::socket::shutdown_send, ignored);
    arm(std::chrono::seconds(2));
    drain_.resize(4096);
    sock_.async_read_some(net::buffer(drain_), [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->close();
      self->linger_more();
    });
  }
  void linger_more() {
    sock_.async_read_some(net::buffer(drain_), [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->close();
      self->linger_more();
    });
  }

  void close() {
    disarm();
    error_code ignored;
    sock_.shutdown(tcp::socket::shutdown_both, ignored);
    sock_.close(ignored);
  }

  void client_gone() {
    if (stream_) {
      stream_->cancel();
      stream_.reset();
      srv_->n_open_responses--;
    }
    close();
  }

  void begin_stream(HttpResponse res) {
    stream_ = std::move(res.stream);
    final_written_ = false;
    srv_->n_open_responses++;
    extra_headers_ = std::move(res.headers);
    if (stream_->streamed()) {
      srv_->report(200);
      pending_out_ = format_head(200, stream_->content_type(), extra_headers_, std::nullopt, keep_alive_);
    }
    watch_client();
    std::weak_ptr<Session> weak = shared_from_this();
    auto ex = sock_.get_executor();
    stream_->set_listener([weak, ex, gate = srv_->gate] {
      std::lock_guard lock(gate->mu);
      if (!gate->open) return;
      net::post(ex, [weak] {
        if (auto s = weak.lock()) s->pump();
      });
    });
    pump();
  }

  // A read kept pending while a response is produced: it ends when the client closes or resets
  // the connection, which cancels the request. Bytes that arrive (a pipelined next request)
  // are kept for the next parse.
  void watch_client() {
    if (buf_.size() >= srv_->limits.max_header_bytes) return;
    watching_ = true;
    sock_.async_read_some(buf_.prepare(4096), [self = shared_from_this()](error_code ec, size_t n) {
      self->watching_ = false;
      if (!ec) self->buf_.commit(n);
      if (self->stream_) {
        if (ec) return self->client_gone();
        return self->watch_client();
      }
      // The response is complete: when its last write is out too, go on (else that write's
      // completion does).
      if (self->final_written_ && self->sock_.is_open()) self->after_stream();
    });
  }

  void pump() {
    if (!stream_ || writing_) return;
    ResponseStream::Chunk c = stream_->poll();
    if (stream_->streamed()) {
      pending_out_ += chunk(c.data);
      if (c.done) pending_out_ += "0\r\n\r\n";
    } else if (c.done) {
      srv_->report(c.status);
      pending_out_ = format_head(c.status, stream_->content_type(), extra_headers_, c.data.size(), keep_alive_);
      pending_out_ += c.data;
    }
    if (c.done) {
      stream_.reset();
      srv_->n_open_responses--;
      done_ = true;
    }
    if (pending_out_.empty()) return;
    out_.swap(pending_out_);
    pending_out_.clear();
    write(out_, [self = shared_from_this()] {
      if (!self->done_) return self->pump();
      self->done_ = false;
      self->final_written_ = true;
      // The response is out: stop watching, then read the next request (keep-alive).
      if (self->watching_) {
        error_code ignored;
        self->sock_.cancel(ignored);  // the watch's handler goes on to after_stream()
      } else {
        self->after_stream();
      }
    });
  }

  void after_stream() {
    if (keep_alive_) read_request();
    else linger_close();
  }

  HttpServer::Impl* srv_;
  tcp::socket sock_;
  net::steady_timer timer_;
  uint64_t timer_gen_ = 0;
  bool timed_out_ = false;
  bool lingering_ = false;
  boost::beast::flat_buffer buf_;
  std::optional<Parser> parser_;
  bool keep_alive_ = true;
  bool head_ = false;
  bool writing_ = false;
  bool watching_ = false;
  bool done_ = false;           // the stream's last chunk is taken
  bool final_written_ = false;  // and written
  std::string out_, pending_out_;
  std::vector<char> drain_;
  std::shared_ptr<ResponseStream> stream_;
  std::vector<std::pair<std::string, std::string>> extra_headers_;
};

}  // namespace

void HttpServer::Impl::accept() {
  acceptor->async_accept(net::make_strand(*ioc), [self = this](error_code ec, tcp::socket sock) {
    if (ec) {
      if (!self->acceptor->is_open()) return;  // stop_accepting()
      // Out of descriptors or a client that reset during the handshake: keep accepting.
      return self->accept();
    }
    error_code ignored;
    sock.set_option(tcp::no_delay(true), ignored);
    self->n_connections++;
    std::make_shared<Session>(self, std::move(sock))->start();
    self->accept();
  });
}

HttpServer::HttpServer(HttpLimits limits, HttpHandler handler, HttpErrorResponder error_response, std::function<void(int)> on_status)
    : impl_(std::make_unique<Impl>()) {
  impl_->limits = limits;
  impl_->handler = std::move(handler);
  impl_->error_response = std::move(error_response);
  impl_->on_status = std::move(on_status);
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::listen(const std::string& host, int port) {
  error_code ec;
  const auto addr = net::ip::make_address(host, ec);
  if (ec) fail("--host '{}': not an IP address ({})", host, ec.message());
  if (port < 0 || port > 65535) fail("--port {}: expected 0 to 65535", port);
  const tcp::endpoint ep(addr, static_cast<unsigned short>(port));
  auto& a = *impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) fail("cannot listen on {}:{}: {}", host, port, ec.message());
  return a.local_endpoint().port();
}

void HttpServer::start() {
  impl_->work.emplace(impl_->ioc->get_executor());
  impl_->accept();
  for (int i = 0; i < std::max(1, impl_->limits.threads); i++) impl_->threads.emplace_back([impl = impl_.get()] { impl->ioc->run(); });
}

void HttpServer::stop_accepting() {
  net::post(impl_->acceptor->get_executor(), [impl = impl_.get()] {
    error_code ignored;
    impl->acceptor->close(ignored);
  });
}

void HttpServer::stop() {
  if (!impl_->ioc) return;
  {
    std::lock_guard lock(impl_->gate->mu);
    impl_->gate->open = false;
  }
  impl_->work.reset();
  impl_->ioc->stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
  impl_->acceptor.reset();
  impl_->ioc.reset();
}

size_t HttpServer::connections() const { return impl_->n_connections.load(); }
size_t HttpServer::open_responses() const { return impl_->n_open_responses.load(); }

}  // namespace lumen::server
