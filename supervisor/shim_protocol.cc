#include "supervisor/shim_protocol.h"

#include <unistd.h>

#include <iterator>

namespace torchxd::supervisor {
namespace {

void Field(std::string& out, std::string_view name, std::string_view value) {
  out.append(name);
  out += ' ';
  out += std::to_string(value.size());
  out += '\n';
  out.append(value);
  out += '\n';
}

// A uid or gid: decimal digits only, no sign, below (uid_t)-1.
bool ParseId(std::string_view s, unsigned& out) {
  // Canonical decimal only (no leading zeros): one spelling per value.
  if (s.empty() || s.size() > 10 || (s.size() > 1 && s[0] == '0')) return false;
  unsigned long long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v >= 0xffffffffull) return false;
  out = static_cast<unsigned>(v);
  return true;
}

int FieldRank(std::string_view name) {
  static constexpr std::string_view kOrder[] = {"cwd",   "arg",    "env",     "nofile", "uid",  "gid",
                                                 "group", "log",    "logmax", "attempt", "nonce", "keep", "end"};
  for (size_t i = 0; i < std::size(kOrder); ++i) {
    if (kOrder[i] == name) return static_cast<int>(i) + 1;
  }
  return 0;  // unknown: refused by the caller
}

bool HeaderPrefixOk(std::string_view h) {
  if (h.size() > 64) return false;
  size_t i = 0;
  while (i < h.size() && ((h[i] >= 'a' && h[i] <= 'z') || h[i] == '-')) ++i;
  if (i == h.size()) return true;
  if (i == 0 || h[i] != ' ') return false;
  for (++i; i < h.size(); ++i) {
    if (h[i] < '0' || h[i] > '9') return false;
  }
  return true;
}

// Canonical decimal, up to 2^63.
bool ParseU64(std::string_view s, uint64_t& out) {
  if (s.empty() || s.size() > 19 || (s.size() > 1 && s[0] == '0')) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  out = v;
  return true;
}

}  // namespace

std::string EncodeShimSpec(const ShimSpec& spec) {
  std::string out;
  Field(out, "torchxd-shim-spec", kShimSpecVersion);
  Field(out, "cwd", spec.cwd);
  for (const auto& a : spec.argv) Field(out, "arg", a);
  for (const auto& e : spec.env) Field(out, "env", e);
  if (spec.nofile != 0) Field(out, "nofile", std::to_string(spec.nofile));
  Field(out, "uid", std::to_string(spec.credentials.uid));
  Field(out, "gid", std::to_string(spec.credentials.gid));
  for (unsigned g : spec.credentials.groups) Field(out, "group", std::to_string(g));
  if (!spec.log_dir.empty()) Field(out, "log", spec.log_dir);
  if (spec.log_max_bytes != 0) Field(out, "logmax", std::to_string(spec.log_max_bytes));
  if (spec.attempt != 1) Field(out, "attempt", std::to_string(spec.attempt));
  if (!spec.nonce.empty()) Field(out, "nonce", spec.nonce);
  if (spec.keep) Field(out, "keep", "1");
  Field(out, "end", "");
  return out;
}

ShimDecode DecodeShimSpec(std::string_view bytes, ShimSpec& spec, std::string& error, size_t* used) {
  spec = ShimSpec{};
  error.clear();
  bool have_cwd = false, have_uid = false, have_gid = false, have_log = false, have_logmax = false,
       have_attempt = false, have_nonce = false, have_keep = false;
  int last_rank = 0;
  size_t pos = 0;
  for (int index = 0;; ++index) {
    if (pos > kMaxShimSpecBytes) {
      error = "spec larger than " + std::to_string(kMaxShimSpecBytes) + " bytes";
      return ShimDecode::kInvalid;
    }
    size_t nl = bytes.find('\n', pos);
    // A header is [a-z-]+ ' ' [0-9]+: anything else is refused as soon as it arrives.
    std::string_view seen = bytes.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    if (!HeaderPrefixOk(seen)) {
      error = "malformed field header";
      return ShimDecode::kInvalid;
    }
    if (nl == std::string_view::npos) return ShimDecode::kNeedMore;
    std::string_view header = bytes.substr(pos, nl - pos);
    size_t space = header.find(' ');
    if (space == std::string_view::npos || space == 0 || header.size() - space - 1 > 8) {
      error = "malformed field header";
      return ShimDecode::kInvalid;
    }
    std::string_view name = header.substr(0, space);
    size_t length = 0;
    for (char c : header.substr(space + 1)) {
      if (c < '0' || c > '9') {
        error = "malformed field length";
        return ShimDecode::kInvalid;
      }
      length = length * 10 + static_cast<size_t>(c - '0');
    }
    bool leading_zero = header.size() > space + 2 && header[space + 1] == '0';
    if (header.size() == space + 1 || leading_zero || length > kMaxShimFieldBytes) {
      error = "malformed field length";
      return ShimDecode::kInvalid;
    }
    size_t value_at = nl + 1;
    if (bytes.size() < value_at + length + 1) return ShimDecode::kNeedMore;
    if (bytes[value_at + length] != '\n') {
      error = "field " + std::string(name) + " does not end where its length says";
      return ShimDecode::kInvalid;
    }
    std::string_view value = bytes.substr(value_at, length);
    pos = value_at + length + 1;
    if (index == 0) {
      if (name != "torchxd-shim-spec" || value != kShimSpecVersion) {
        error = "not a version " + std::string(kShimSpecVersion) + " spec";
        return ShimDecode::kInvalid;
      }
      continue;
    }
    auto once = [&](bool& seen) {
      if (seen) error = "field " + std::string(name) + " given twice";
      seen = true;
      return error.empty();
    };
    // Fields come in the documented order (one spelling per spec).
    int rank = FieldRank(name);
    if (rank > 0 && rank < last_rank) {
      error = "field " + std::string(name) + " out of order";
      return ShimDecode::kInvalid;
    }
    if (rank > 0) last_rank = rank;
    if (name == "cwd") {
      if (!once(have_cwd)) return ShimDecode::kInvalid;
      spec.cwd = value;
    } else if (name == "arg") {
      spec.argv.emplace_back(value);
    } else if (name == "env") {
      if (value.find('=') == std::string_view::npos || value.front() == '=') {
        error = "env entry without a name";
        return ShimDecode::kInvalid;
      }
      spec.env.emplace_back(value);
    } else if (name == "uid" || name == "gid") {
      bool& seen = name == "uid" ? have_uid : have_gid;
      if (!once(seen)) return ShimDecode::kInvalid;
      unsigned& id = name == "uid" ? spec.credentials.uid : spec.credentials.gid;
      if (!ParseId(value, id)) {
        error = "invalid " + std::string(name);
        return ShimDecode::kInvalid;
      }
    } else if (name == "nofile") {
      unsigned n = 0;
      if (!ParseId(value, n) || n == 0) {
        error = "invalid nofile";
        return ShimDecode::kInvalid;
      }
      spec.nofile = n;
    } else if (name == "group") {
      unsigned g = 0;
      if (!ParseId(value, g) || spec.credentials.groups.size() >= 65536) {
        error = "invalid group";
        return ShimDecode::kInvalid;
      }
      spec.credentials.groups.push_back(g);
    } else if (name == "log") {
      if (!once(have_log)) return ShimDecode::kInvalid;
      if (value.empty() || value[0] != '/' || value.find('\0') != std::string_view::npos) {
        error = "invalid log directory";
        return ShimDecode::kInvalid;
      }
      spec.log_dir = value;
    } else if (name == "logmax") {
      if (!once(have_logmax)) return ShimDecode::kInvalid;
      if (!ParseU64(value, spec.log_max_bytes) || spec.log_max_bytes == 0) {
        error = "invalid logmax";
        return ShimDecode::kInvalid;
      }
    } else if (name == "attempt") {
      if (!once(have_attempt)) return ShimDecode::kInvalid;
      unsigned n = 0;
      if (!ParseId(value, n) || n < 2 || n > 1000000000) {
        error = "invalid attempt";
        return ShimDecode::kInvalid;
      }
      spec.attempt = static_cast<int>(n);
    } else if (name == "nonce") {
      if (!once(have_nonce)) return ShimDecode::kInvalid;
      bool ok = !value.empty() && value.size() <= 64;
      for (char c : value) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
      if (!ok) {
        error = "invalid nonce";
        return ShimDecode::kInvalid;
      }
      spec.nonce = value;
    } else if (name == "keep") {
      if (!once(have_keep)) return ShimDecode::kInvalid;
      if (value != "1") {
        error = "invalid keep";
        return ShimDecode::kInvalid;
      }
      spec.keep = true;
    } else if (name == "end") {
      if (!value.empty()) {
        error = "field end has a value";
        return ShimDecode::kInvalid;
      }
      if (used != nullptr) {
        *used = pos;
      } else if (pos != bytes.size()) {
        error = "bytes after the end of the spec";
        return ShimDecode::kInvalid;
      }
      if (!have_cwd || spec.argv.empty()) error = "spec without cwd or program";
      if (!have_uid || !have_gid) error = "spec without the credentials to run as";
      for (const auto& s : spec.argv) {
        if (s.find('\0') != std::string::npos) error = "NUL in an argument";
      }
      for (const auto& s : spec.env) {
        if (s.find('\0') != std::string::npos) error = "NUL in an environment entry";
      }
      if (spec.cwd.empty() || spec.cwd.find('\0') != std::string::npos) error = "invalid cwd";
      return error.empty() ? ShimDecode::kComplete : ShimDecode::kInvalid;
    } else {
      error = "unknown field " + OneLine(name.substr(0, 32));
      return ShimDecode::kInvalid;
    }
  }
}

std::optional<ControlMessage> ParseControlLine(std::string_view line) {
  if (line.size() > kMaxControlLineBytes) return std::nullopt;
  static constexpr struct {
    std::string_view word;
    ControlKind kind;
    int numbers;    // canonical decimals after the word
    bool has_text;  // then one space and the rest of the line
  } kForms[] = {
      {"hello", ControlKind::kHello, 1, true},        {"stop", ControlKind::kStop, 1, false},
      {"kill", ControlKind::kKill, 0, false},         {"ready", ControlKind::kReady, 4, false},
      {"started", ControlKind::kStarted, 1, false},   {"spawn-failed", ControlKind::kSpawnFailed, 1, true},
      {"logged", ControlKind::kLogged, 2, false},     {"exited", ControlKind::kExited, 1, false},
      {"signaled", ControlKind::kSignaled, 1, false},
  };
  size_t space = line.find(' ');
  std::string_view word = line.substr(0, space);
  for (const auto& form : kForms) {
    if (form.word != word) continue;
    if (form.numbers == 0 && !form.has_text && space != std::string_view::npos) return std::nullopt;
    ControlMessage m;
    m.kind = form.kind;
    uint64_t* slots[] = {&m.a, &m.b, &m.c, &m.d};
    std::string_view rest = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    if (space == std::string_view::npos && (form.numbers > 0 || form.has_text)) return std::nullopt;
    for (int i = 0; i < form.numbers; ++i) {
      size_t end = rest.find(' ');
      bool last = i + 1 == form.numbers && !form.has_text;
      if ((end == std::string_view::npos) != last) return std::nullopt;
      if (!ParseU64(rest.substr(0, end), *slots[i])) return std::nullopt;
      rest = last ? std::string_view() : rest.substr(end + 1);
    }
    if (form.has_text) {
      for (char c : rest) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return std::nullopt;
      }
      m.text = rest;
    }
    return m;
  }
  return std::nullopt;
}

bool IsAlready(const ShimCredentials& c) {
  return c.groups.empty() && ::getuid() == c.uid && ::geteuid() == c.uid && ::getgid() == c.gid &&
         ::getegid() == c.gid;
}

std::string OneLine(std::string_view message) {
  std::string out(message);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

}  // namespace torchxd::supervisor
