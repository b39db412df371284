#include "cli/reply_text.h"

#include <ostream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/frame_sax.h"
#include "core/json_parse.h"

namespace torchxd::cli {
namespace {

using nlohmann::json;

// nlohmann's SAX events of a frame: those of its "result" are written out as
// dump(2) writes a value; the rest of the frame is passed over. The parser
// keeps no recursion, and neither does this (a stack of open containers).
class Indenter : public FrameSax {
 public:
  std::string out;
  // Where `out` goes as it grows (null: it is kept whole).
  std::ostream* sink = nullptr;

  bool null() override { return Scalar("null"); }
  bool boolean(bool value) override { return Scalar(value ? "true" : "false"); }
  bool number_integer(number_integer_t value) override { return Scalar(std::to_string(value)); }
  bool number_unsigned(number_unsigned_t value) override { return Scalar(std::to_string(value)); }
  bool number_float(number_float_t value, const string_t&) override { return Scalar(json(value).dump()); }
  bool string(string_t& value) override {
    if (!open_.empty()) {  // most strings: written in place
      if (!open_.back().object) Separate();
      core::AppendJsonString(out, value);
      return Spill();
    }
    std::string quoted;
    core::AppendJsonString(quoted, value);
    return Scalar(quoted);
  }
  // Hands `out` to the sink once it holds a chunk: a result of megabytes is never held whole.
  bool Spill() {
    if (sink != nullptr && out.size() >= kChunk) Flush();
    return true;
  }
  static constexpr size_t kChunk = 1 << 16;
  // The rest of `out` to the sink.
  void Flush() {
    if (sink != nullptr && !out.empty()) {
      sink->write(out.data(), static_cast<std::streamsize>(out.size()));
      out.clear();
    }
  }
  bool key(string_t& value) override {
    if (open_.empty()) {
      if (depth_ == 1) key_ = std::move(value);
      return true;
    }
    Separate();
    core::AppendJsonString(out, value);
    out += ": ";
    return true;
  }
  bool start_object(std::size_t) override { return Open('{'); }
  bool end_object() override { return Close('}'); }
  bool start_array(std::size_t) override { return Open('['); }
  bool end_array() override { return Close(']'); }

 private:
  struct Container {
    bool object;
    size_t items = 0;
  };


  // Where the frame's own value for `key_` starts: true when it is printed.
  bool AtResult() {
    if (depth_ != 1) return false;
    if (key_ == "result") {
      if (has_result) twice_ = true;
      has_result = true;
      return !twice_;
    }
    if (key_ == "error") error_frame = true;
    return false;
  }
  // Before an array's item (an object's keys write their own).
  void Separate() {
    Container& top = open_.back();
    out += top.items++ ? ",\n" : "\n";
    out.append(2 * open_.size(), ' ');
  }
  bool Scalar(std::string_view text) {
    if (open_.empty()) {
      if (depth_ == 0) return Stop("not a JSON object");
      if (AtResult()) out += text;
      if (twice_) return Stop("a reply with two results");
      return !error_frame;
    }
    if (!open_.back().object) Separate();
    out += text;
    return Spill();
  }
  bool Open(char c) {
    if (open_.empty()) {
      if (depth_ == 0 && c == '[') return Stop("not a JSON object");
      if (!AtResult()) {
        if (twice_) return Stop("a reply with two results");
        ++depth_;
        return !error_frame;
      }
    } else if (!open_.back().object) {
      Separate();
    }
    out += c;
    open_.push_back({c == '{'});
    return true;
  }
  bool Close(char c) {
    if (open_.empty()) {
      --depth_;
      return true;
    }
    size_t items = open_.back().items;
    open_.pop_back();
    if (items > 0) {
      out += '\n';
      out.append(2 * open_.size(), ' ');
    }
    out += c;
    return Spill();
  }

  bool twice_ = false;       // a second "result"
  int depth_ = 0;            // containers open around the frame's own keys (the result's not counted)
  std::string key_;          // the frame's key whose value comes next
  std::vector<Container> open_;  // the result's open containers
};

}  // namespace

Result<std::string> IndentedResult(std::string_view frame) {
  Indenter indenter;
  indenter.out.reserve(frame.size() + frame.size() / 2);
  if (auto ok = ReadFrameWith(frame, indenter, "reply"); !ok) return Fail(ok.error());
  return std::move(indenter.out);
}

Result<void> WriteIndentedResult(std::string_view frame, std::ostream& out) {
  Indenter indenter;
  indenter.sink = &out;
  indenter.out.reserve(Indenter::kChunk + 4096);
  if (auto ok = ReadFrameWith(frame, indenter, "reply"); !ok) return Fail(ok.error());
  indenter.Flush();
  return {};
}

}  // namespace torchxd::cli
