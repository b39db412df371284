#include "net/http_client.h"

#include <cstdio>

#include "core/check.h"
#include "core/duration.h"
#include "net/curl_api.h"

namespace torchxd::net {
namespace {
// Set by Create() before any HttpClient exists; libcurl is loaded on first use (curl_api.h).
const CurlApi* api = nullptr;
}  // namespace

struct HttpClient::Transfer {
  HttpClient* client = nullptr;
  RequestId id = 0;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  HttpRequest request;
  HttpResponse response;
  DataCallback on_data;
  DoneCallback on_done;
  OpenCallback on_open;
  UvHandle<uv_timer_t> answer_timer;  // streams: the headers' deadline
  bool opened = false;
  bool cancelled = false;
  bool added = false;
  bool too_big = false;
  char error[CURL_ERROR_SIZE] = {};

  ~Transfer() {
    if (easy != nullptr) api->easy_cleanup(easy);
    if (headers != nullptr) api->slist_free_all(headers);
  }
};

namespace {


void SetBlob(CURL* easy, CURLoption option, const std::string& pem) {
  curl_blob blob{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};
  api->easy_setopt(easy, option, &blob);
}

void ApplyTls(CURL* easy, const TlsOptions& tls) {
  if (!tls.ca_file.empty()) api->easy_setopt(easy, CURLOPT_CAINFO, tls.ca_file.c_str());
  if (!tls.ca_pem.empty()) SetBlob(easy, CURLOPT_CAINFO_BLOB, tls.ca_pem);
  if (!tls.cert_file.empty()) api->easy_setopt(easy, CURLOPT_SSLCERT, tls.cert_file.c_str());
  if (!tls.cert_pem.empty()) SetBlob(easy, CURLOPT_SSLCERT_BLOB, tls.cert_pem);
  if (!tls.key_file.empty()) api->easy_setopt(easy, CURLOPT_SSLKEY, tls.key_file.c_str());
  if (!tls.key_pem.empty()) SetBlob(easy, CURLOPT_SSLKEY_BLOB, tls.key_pem);
  if (!tls.cert_pem.empty() || !tls.cert_file.empty()) api->easy_setopt(easy, CURLOPT_SSLCERTTYPE, "PEM");
  if (tls.insecure_skip_verify) {
    api->easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
    api->easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
  }
}

}  // namespace

Result<std::unique_ptr<HttpClient>> HttpClient::Create(uv_loop_t* loop, std::string purpose) {
  auto loaded = LoadCurl();
  if (!loaded) return Fail(loaded.error());
  api = *loaded;
  return std::unique_ptr<HttpClient>(new HttpClient(loop, std::move(purpose)));
}

HttpClient::HttpClient(uv_loop_t* loop, std::string purpose) : loop_(loop), counters_of_(&counters_[purpose]) {
  multi_ = api->multi_init();
  TORCHXD_CHECK(multi_ != nullptr);
  api->multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &HttpClient::OnSocket);
  api->multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
  api->multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &HttpClient::OnTimer);
  api->multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
  timer_ = NewUvHandle<uv_timer_t>(this);
  uv_timer_init(loop_, timer_.get());
}

HttpClient::~HttpClient() {
  for (auto& [id, t] : transfers_) {
    if (t->added) api->multi_remove_handle(multi_, t->easy);
  }
  transfers_.clear();
  api->multi_cleanup(multi_);
  polls_.clear();
}

HttpClient::RequestId HttpClient::Start(HttpRequest request, DataCallback on_data, DoneCallback on_done,
                                        OpenCallback on_open) {
  ++counters_of_->started;
  auto t = std::make_unique<Transfer>();
  t->client = this;
  t->id = next_id_++;
  t->request = std::move(request);
  t->on_data = std::move(on_data);
  t->on_done = std::move(on_done);
  t->on_open = std::move(on_open);
  CURL* e = t->easy = api->easy_init();
  TORCHXD_CHECK(e != nullptr);
  const HttpRequest& r = t->request;
  api->easy_setopt(e, CURLOPT_URL, r.url.c_str());
  api->easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  api->easy_setopt(e, CURLOPT_PRIVATE, t.get());
  api->easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
  api->easy_setopt(e, CURLOPT_WRITEFUNCTION, &HttpClient::OnWrite);
  api->easy_setopt(e, CURLOPT_WRITEDATA, t.get());
  if (r.stream && r.answer_timeout_ms > 0) {
    t->answer_timer = NewUvHandle<uv_timer_t>(t.get());
    uv_timer_init(loop_, t->answer_timer.get());
    uv_timer_start(t->answer_timer.get(), [](uv_timer_t* h) {
      if (auto* transfer = static_cast<Transfer*>(h->data)) transfer->client->NoAnswer(transfer->id);
    }, static_cast<uint64_t>(r.answer_timeout_ms), 0);
  }
  if (t->on_open || t->answer_timer) {
    api->easy_setopt(e, CURLOPT_HEADERFUNCTION, &HttpClient::OnHeader);
    api->easy_setopt(e, CURLOPT_HEADERDATA, t.get());
  }
  api->easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  api->easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(r.connect_timeout_ms));
  if (r.timeout_ms > 0) api->easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(r.timeout_ms));
  if (!r.unix_socket.empty()) api->easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, r.unix_socket.c_str());
  if (r.method == "GET") {
    api->easy_setopt(e, CURLOPT_HTTPGET, 1L);
  } else {
    api->easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  }
  if (!r.body.empty() || r.method == "POST" || r.method == "PUT" || r.method == "PATCH") {
    api->easy_setopt(e, CURLOPT_POSTFIELDS, r.body.data());
    api->easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
  }
  for (const auto& h : r.headers) t->headers = api->slist_append(t->headers, h.c_str());
  if (t->headers != nullptr) api->easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
  ApplyTls(e, r.tls);
  Transfer* raw = t.get();
  transfers_[raw->id] = std::move(t);
  if (in_curl_ > 0) {
    pending_add_.push_back(raw);  // curl refuses re-entrant multi calls
  } else {
    Add(raw);
  }
  return raw->id;
}

void HttpClient::Add(Transfer* t) {
  t->added = true;
  CURLMcode code = api->multi_add_handle(multi_, t->easy);
  TORCHXD_CHECK(code == CURLM_OK);
}

void HttpClient::Cancel(RequestId id) {
  auto it = transfers_.find(id);
  if (it == transfers_.end()) return;
  it->second->cancelled = true;
  if (in_curl_ == 0) Remove(it->second.get());  // else Reap() removes it
}

void HttpClient::Remove(Transfer* t) {
  if (t->added) api->multi_remove_handle(multi_, t->easy);
  std::erase(pending_add_, t);
  transfers_.erase(t->id);
}

size_t HttpClient::OnWrite(char* data, size_t size, size_t n, void* userp) {
  auto* t = static_cast<Transfer*>(userp);
  size_t bytes = size * n;
  if (t->cancelled) return 0;
  long status = 0;
  api->easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  if (t->request.stream && status >= 200 && status < 300 && t->on_data) {
    try {
      t->on_data(std::string_view(data, bytes));
    } catch (const std::exception&) {
      return 0;  // never let an exception cross curl
    }
    return t->cancelled ? 0 : bytes;
  }
  if (t->response.body.size() + bytes > kMaxBodyBytes) {
    t->too_big = true;
    return 0;
  }
  t->response.body.append(data, bytes);
  return bytes;
}

size_t HttpClient::OnHeader(char* data, size_t size, size_t n, void* userp) {
  auto* t = static_cast<Transfer*>(userp);
  size_t bytes = size * n;
  std::string_view line(data, bytes);
  if (t->cancelled || t->opened || (line != "\r\n" && line != "\n")) return bytes;
  long status = 0;  // the blank line ends a response's headers (also a 1xx's, which does not count)
  api->easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200) return bytes;
  t->opened = true;
  if (t->answer_timer) uv_timer_stop(t->answer_timer.get());
  if (!t->on_open) return bytes;
  try {
    t->on_open(status);
  } catch (const std::exception&) {
    return 0;  // never let an exception cross curl
  }
  return bytes;
}

void HttpClient::NoAnswer(RequestId id) {
  auto it = transfers_.find(id);
  if (it == transfers_.end() || it->second->opened || it->second->cancelled) return;
  Transfer* t = it->second.get();
  std::string what = t->request.method + " " + t->request.url;
  int64_t ms = t->request.answer_timeout_ms;
  auto done = std::move(t->on_done);
  Cancel(id);  // outside curl (a timer): removed now, with this timer
  done(Fail(Error::Timeout(what + ": no answer within " + core::FormatDurationMs(ms))));
}

int HttpClient::OnSocket(CURL*, curl_socket_t s, int what, void* userp, void*) {
  auto* self = static_cast<HttpClient*>(userp);
  if (what == CURL_POLL_REMOVE) {
    auto it = self->polls_.find(s);
    if (it != self->polls_.end()) {
      uv_poll_stop(it->second.get());
      self->polls_.erase(it);
    }
    return 0;
  }
  auto it = self->polls_.find(s);
  if (it == self->polls_.end()) {
    auto poll = NewUvHandle<uv_poll_t>(self);
    if (uv_poll_init_socket(self->loop_, poll.get(), s) != 0) return -1;
    it = self->polls_.emplace(s, std::move(poll)).first;
  }
  int events = 0;
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= UV_READABLE;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= UV_WRITABLE;
  uv_poll_start(it->second.get(), events, &HttpClient::OnPoll);
  return 0;
}

int HttpClient::OnTimer(CURLM*, long timeout_ms, void* userp) {
  auto* self = static_cast<HttpClient*>(userp);
  if (timeout_ms < 0) {
    uv_timer_stop(self->timer_.get());
  } else {
    uv_timer_start(self->timer_.get(), &HttpClient::OnTimeout, static_cast<uint64_t>(timeout_ms), 0);
  }
  return 0;
}

void HttpClient::OnPoll(uv_poll_t* handle, int status, int events) {
  auto* self = static_cast<HttpClient*>(handle->data);
  if (self == nullptr) return;
  int flags = 0;
  if (status < 0) flags = CURL_CSELECT_ERR;
  if ((events & UV_READABLE) != 0) flags |= CURL_CSELECT_IN;
  if ((events & UV_WRITABLE) != 0) flags |= CURL_CSELECT_OUT;
  // The fd is read before Act: curl may close this poll's socket inside.
  uv_os_fd_t fd = -1;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(handle), &fd) != 0) return;
  self->Act(fd, flags);
}

void HttpClient::OnTimeout(uv_timer_t* handle) {
  auto* self = static_cast<HttpClient*>(handle->data);
  if (self != nullptr) self->Act(CURL_SOCKET_TIMEOUT, 0);
}

void HttpClient::Act(curl_socket_t fd, int flags) {
  int running = 0;
  ++in_curl_;
  api->multi_socket_action(multi_, fd, flags, &running);
  --in_curl_;
  Reap();
}

void HttpClient::Reap() {
  // Finished transfers first, then what callbacks asked for meanwhile.
  int left = 0;
  while (CURLMsg* msg = api->multi_info_read(multi_, &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    Transfer* t = nullptr;
    api->easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
    if (t != nullptr) Finish(t, msg->data.result);
  }
  ApplyPending();
}

void HttpClient::ApplyPending() {
  std::vector<Transfer*> cancelled;
  for (auto& [id, t] : transfers_) {
    if (t->cancelled) cancelled.push_back(t.get());
  }
  for (Transfer* t : cancelled) Remove(t);
  auto adds = std::move(pending_add_);
  pending_add_.clear();
  for (Transfer* t : adds) Add(t);
}

void HttpClient::Finish(Transfer* t, CURLcode code) {
  api->multi_remove_handle(multi_, t->easy);
  t->added = false;
  std::unique_ptr<Transfer> owned = std::move(transfers_[t->id]);
  transfers_.erase(t->id);
  if (t->cancelled) return;
  // A callback's exception (say, a server's odd JSON) must not cross libuv: report it and go on.
  try {
    Deliver(*t, code);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torchxd: error handling the answer to %s %s: %s\n", t->request.method.c_str(),
                 t->request.url.c_str(), e.what());
  }
}

void HttpClient::Deliver(Transfer& transfer, CURLcode code) {
  Transfer* t = &transfer;
  const HttpRequest& r = t->request;
  std::string where = r.unix_socket.empty() ? r.url : r.unix_socket + " (" + r.url + ")";
  if (t->too_big) {
    return t->on_done(Fail(Error::Io(r.method + " " + where + ": response larger than " +
                                     std::to_string(kMaxBodyBytes >> 20) + " MiB")));
  }
  if (code != CURLE_OK) {
    ++counters_of_->failed;
    std::string detail = t->error[0] != '\0' ? t->error : api->easy_strerror(code);
    Error e = code == CURLE_OPERATION_TIMEDOUT ? Error::Timeout(r.method + " " + where + ": " + detail)
                                               : Error::Unavailable(r.method + " " + where + ": " + detail);
    return t->on_done(Fail(std::move(e)));
  }
  api->easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->response.status);
  t->on_done(std::move(t->response));
}

}  // namespace torchxd::net
