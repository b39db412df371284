#include "webui/bridge.h"

#include <cstdlib>

namespace torchxd::webui {

void CallbackResponder::Event(const nlohmann::json& event) {
  if (alive() && callbacks_.event) callbacks_.event(event);
}

void CallbackResponder::ResultText(const std::string& result_json) {
  if (done_) return;
  Done();
  if (!exchange_.expired() && callbacks_.result) callbacks_.result(result_json);
}

void CallbackResponder::Error(const torchxd::Error& error) {
  if (done_) return;
  Done();
  if (!exchange_.expired() && callbacks_.error) callbacks_.error(error);
}

void CallbackResponder::Done() {
  done_ = true;
  gone_->clear();
}

void CallbackResponder::Detach() {
  if (done_) return;
  done_ = true;
  GoneList callbacks = std::move(*gone_);
  gone_->clear();
  for (auto& callback : callbacks) callback();
}

bool CallbackResponder::alive() const {
  auto exchange = exchange_.lock();
  return exchange && exchange->alive() && !done_;
}

void CallbackResponder::OnGone(std::function<void()> callback) {
  if (done_) return;  // answered: nothing is left to stop
  auto exchange = exchange_.lock();
  if (!exchange || !exchange->alive()) return callback();
  gone_->push_back(std::move(callback));
  if (registered_) return;
  registered_ = true;
  std::weak_ptr<GoneList> list = gone_;
  exchange->OnGone([list] {
    auto callbacks = list.lock();
    if (!callbacks) return;  // the responder is gone, and with it its request
    GoneList run = std::move(*callbacks);
    callbacks->clear();
    for (auto& callback : run) callback();
  });
}

size_t CallbackResponder::QueuedBytes() const {
  auto exchange = exchange_.lock();
  return exchange ? exchange->QueuedBytes() : 0;
}

void CallbackResponder::WhenDrained(std::function<void()> callback) {
  if (auto exchange = exchange_.lock()) return exchange->WhenDrained(std::move(callback));
  callback();
}

std::optional<int> QueryInt(const std::string& text, int lo, int hi) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (*end != '\0' || v < lo || v > hi) return std::nullopt;
  return static_cast<int>(v);
}

int HttpStatusOf(const torchxd::Error& error) {
  switch (error.code) {
    case ErrorCode::kInvalidArgument:
      return 400;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kAlreadyExists:
      return 409;
    case ErrorCode::kPermissionDenied:
      return 403;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kTimeout:
      return 504;
    default:
      return 500;
  }
}

std::string ErrorJson(const torchxd::Error& error) {
  return nlohmann::json{{"error", {{"code", std::string(ErrorCodeName(error.code))}, {"message", error.message}}}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace torchxd::webui
