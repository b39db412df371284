#include "cli/list_page.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "cli/frame_sax.h"

namespace torchxd::cli {
namespace {

using nlohmann::json;

// nlohmann's SAX events over {"id":N,"result":{"fields":[...],"apps":[[...],...],"next":"..."}}.
// The parser itself keeps no recursion; values of keys not read here are skipped whole.
class PageReader : public FrameSax {
 public:
  enum class At { kStart, kFrame, kResult, kFields, kApps, kRow, kEnd };

  ListPage page;

  bool null() override { return Scalar(ListCell{}); }
  bool boolean(bool value) override { return Other(value); }
  bool number_integer(number_integer_t value) override { return Scalar(Integer(value)); }
  bool number_unsigned(number_unsigned_t value) override {
    if (value > static_cast<number_unsigned_t>(INT64_MAX)) return Other(value);
    return Scalar(Integer(static_cast<int64_t>(value)));
  }
  bool number_float(number_float_t value, const string_t&) override { return Other(value); }
  bool string(string_t& value) override {
    if (skip_ > 0) return true;
    if (at_ == At::kFields) {
      page.fields.push_back(std::move(value));
      return true;
    }
    if (at_ == At::kResult && key_ == "next") {
      page.next = std::move(value);
      return true;
    }
    if (at_ != At::kRow) return Scalar(ListCell{});  // refused or skipped there
    ListCell cell;
    cell.kind = ListCell::Kind::kString;
    cell.text = page.Keep(value);
    return Scalar(cell);
  }
  bool key(string_t& value) override {
    if (skip_ == 0) key_ = std::move(value);
    return true;
  }
  bool start_object(std::size_t) override {
    if (skip_ > 0) {
      ++skip_;
      return true;
    }
    switch (at_) {
      case At::kStart:
        at_ = At::kFrame;
        return true;
      case At::kFrame:
        if (key_ == "result") {
          if (has_result) return Stop("a reply with two results");
          has_result = true;
          at_ = At::kResult;
          return true;
        }
        if (key_ == "error") {
          error_frame = true;
          return false;
        }
        ++skip_;
        return true;
      case At::kResult:
        ++skip_;
        return true;
      default:
        return Stop("an object where a list reply has none");
    }
  }
  bool end_object() override {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    at_ = at_ == At::kResult ? At::kFrame : At::kEnd;
    return true;
  }
  bool start_array(std::size_t) override {
    if (skip_ == 0 && at_ == At::kResult && (key_ == "fields" || key_ == "apps")) {
      at_ = key_ == "fields" ? At::kFields : At::kApps;
      return true;
    }
    if (skip_ == 0 && at_ == At::kApps) {
      at_ = At::kRow;
      page.BeginRow();
      return true;
    }
    if (skip_ == 0 && (at_ == At::kRow || at_ == At::kFields || at_ == At::kStart)) {
      return Stop("an array where a list reply has none");
    }
    ++skip_;
    return true;
  }
  bool end_array() override {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    at_ = at_ == At::kRow ? At::kApps : At::kResult;
    return true;
  }

 private:
  static ListCell Integer(int64_t value) {
    ListCell cell;
    cell.kind = ListCell::Kind::kInteger;
    cell.integer = value;
    return cell;
  }
  // A value a list row never holds today (a boolean, a float): kept as its JSON text.
  bool Other(const json& value) {
    if (skip_ > 0 || at_ != At::kRow) return Scalar(ListCell{});
    ListCell cell;
    cell.kind = ListCell::Kind::kString;
    cell.text = page.Keep(value.dump());
    return Scalar(cell);
  }
  bool Scalar(const ListCell& cell) {
    if (skip_ > 0) return true;
    switch (at_) {
      case At::kRow:
        page.AddCell(cell);
        return true;
      case At::kFields:
        return Stop("a field name that is not a string");
      case At::kApps:
        return Stop("an app row that is not an array");
      case At::kFrame:
        if (key_ == "result") return Stop("a result that is not an object");
        return true;
      case At::kResult:
        return true;
      default:
        return Stop("not a JSON object");
    }
  }
  At at_ = At::kStart;
  std::string key_;  // the key whose value comes next, at the current object
  int skip_ = 0;     // depth inside a value this reader does not read
};

}  // namespace

json ListCell::ToJson() const {
  switch (kind) {
    case Kind::kString:
      return std::string(text);
    case Kind::kInteger:
      return integer;
    default:
      return nullptr;
  }
}

ListRow ListPage::row(size_t i) const {
  size_t end = i + 1 < row_starts_.size() ? row_starts_[i + 1] : cells_.size();
  return ListRow(cells_.data() + row_starts_[i], end - row_starts_[i]);
}

std::string_view ListPage::Keep(std::string_view text) {
  constexpr size_t kBlockBytes = 64 * 1024;
  if (text.empty()) return {};
  if (text.size() > block_left_) {
    size_t size = std::max(kBlockBytes, text.size());
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(size));
    block_end_ = blocks_.back().get();
    block_left_ = size;
  }
  char* at = block_end_;
  std::memcpy(at, text.data(), text.size());
  block_end_ += text.size();
  block_left_ -= text.size();
  return {at, text.size()};
}

Result<ListPage> ReadListPage(std::string_view frame) {
  PageReader reader;
  // Every cell ends at a ',' or a ']': room for them all, so the cells are never moved while read.
  reader.page.Reserve(static_cast<size_t>(std::count_if(frame.begin(), frame.end(), [](char c) { return c == ',' || c == ']'; })));
  if (auto ok = ReadFrameWith(frame, reader, "list reply"); !ok) return Fail(ok.error());
  return std::move(reader.page);
}

}  // namespace torchxd::cli
