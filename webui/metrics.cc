#include "webui/metrics.h"

#include <cmath>
#include <cstdio>

namespace torchxd::webui {
namespace {

std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.9g", v);
  }
  return buf;
}

std::string LabelValue(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string HelpText(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

PromFamily Histogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                     const std::vector<double>& observations) {
  PromFamily f{name, help, "histogram", {}};
  double sum = 0;
  for (double o : observations) sum += o;
  for (double le : bounds) {
    double n = 0;
    for (double o : observations) n += o <= le ? 1 : 0;
    f.samples.push_back({"_bucket", {{"le", Number(le)}}, n});
  }
  f.samples.push_back({"_bucket", {{"le", "+Inf"}}, static_cast<double>(observations.size())});
  f.samples.push_back({"_sum", {}, sum});
  f.samples.push_back({"_count", {}, static_cast<double>(observations.size())});
  return f;
}

std::string FormatPrometheus(const std::vector<PromFamily>& families) {
  std::string out;
  for (const auto& f : families) {
    out += "# HELP " + f.name + " " + HelpText(f.help) + "\n";
    out += "# TYPE " + f.name + " " + f.type + "\n";
    for (const auto& s : f.samples) {
      out += f.name + s.suffix;
      if (!s.labels.empty()) {
        out += "{";
        bool first = true;
        for (const auto& [key, value] : s.labels) {
          out += (first ? "" : ",") + key + "=\"" + LabelValue(value) + "\"";
          first = false;
        }
        out += "}";
      }
      out += " " + Number(s.value) + "\n";
    }
  }
  return out;
}

}  // namespace torchxd::webui
