// Prometheus text exposition (format 0.0.4) for GET /metrics: metric families
// with labelled samples, escaped as the format requires. What is measured is
// the daemon's business (daemon/metrics.cc); this only writes it.
//
// Thread contract: pure.
#ifndef TORCHXD_WEBUI_METRICS_H_
#define TORCHXD_WEBUI_METRICS_H_

#include <map>
#include <string>
#include <vector>

namespace torchxd::webui {

struct PromSample {
  std::string suffix;  // "" or "_bucket", "_sum", "_count"
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromFamily {
  std::string name;
  std::string help;
  std::string type;  // "gauge", "counter", "histogram"
  std::vector<PromSample> samples;
};

// A histogram family from raw observations: cumulative `le` buckets, +Inf, _sum, _count.
PromFamily Histogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                     const std::vector<double>& observations);

std::string FormatPrometheus(const std::vector<PromFamily>& families);

}  // namespace torchxd::webui

#endif  // TORCHXD_WEBUI_METRICS_H_
