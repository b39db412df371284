#include "k8sbridge/pod_rules.h"

#include <cctype>
#include <set>

namespace torchxd::k8sbridge {
namespace {

using nlohmann::json;

bool LowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool Alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

std::string Quote(const std::string& v) { return "\"" + v + "\""; }

// The apiserver's sentence for an invalid field.
std::string Invalid(const std::string& field, const std::string& value, const std::string& why) {
  return field + ": Invalid value: " + Quote(value) + ": " + why;
}

const json& Get(const json& j, const char* key) {
  static const json kNull;
  return j.is_object() && j.contains(key) ? j[key] : kNull;
}

std::string Str(const json& j) { return j.is_string() ? j.get<std::string>() : std::string(); }

// Where the resource names a container may use without a domain end.
bool StandardContainerResource(const std::string& name) {
  return name == "cpu" || name == "memory" || name == "ephemeral-storage" || name.rfind("hugepages-", 0) == 0;
}

class Checker {
 public:
  std::vector<std::string> errors;

  void Labels(const json& labels, const std::string& field) {
    if (!labels.is_object()) return;
    for (const auto& [k, v] : labels.items()) {
      if (std::string why = CheckQualifiedName(k); !why.empty()) errors.push_back(Invalid(field, k, why));
      if (std::string why = CheckLabelValue(Str(v)); !why.empty()) {
        errors.push_back(Invalid(field + "[" + k + "]", Str(v), why));
      }
    }
  }
  void Annotations(const json& annotations, const std::string& field) {
    if (!annotations.is_object()) return;
    for (const auto& [k, v] : annotations.items()) {
      std::string lower;
      for (char c : k) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (std::string why = CheckQualifiedName(lower); !why.empty()) errors.push_back(Invalid(field, k, why));
    }
  }
  void Name(const std::string& value, const std::string& field, bool subdomain = false) {
    std::string why = subdomain ? CheckDns1123Subdomain(value) : CheckDns1123Label(value);
    if (!why.empty()) errors.push_back(Invalid(field, value, why));
  }
  void Resources(const json& resources, const std::string& field) {
    const json& limits = Get(resources, "limits");
    const json& requests = Get(resources, "requests");
    for (const auto& [kind, list] : {std::pair{"limits", &limits}, std::pair{"requests", &requests}}) {
      if (!list->is_object()) continue;
      for (const auto& [name, q] : list->items()) {
        std::string at = field + "." + kind + "[" + name + "]";
        bool extended = name.find('/') != std::string::npos;
        if (std::string why = CheckQualifiedName(name); !why.empty()) {
          errors.push_back(Invalid(field + "." + kind + "[" + name + "]", name, why));
          continue;
        }
        if (!extended && !StandardContainerResource(name)) {
          errors.push_back(Invalid(at, name, "must be a standard resource for containers"));
          continue;
        }
        std::string value = Str(q);
        if (std::string why = CheckQuantity(value); !why.empty()) {
          errors.push_back(Invalid(at, value, why));
          continue;
        }
        if (extended && name.rfind("kubernetes.io/", 0) != 0) {
          bool integer = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
          if (!integer) errors.push_back(Invalid(at, value, "must be an integer"));
          if (std::string(kind) == "requests" && Str(Get(limits, name.c_str())) != value) {
            errors.push_back(Invalid(at, value, "must be equal to " + name + " limit of " + Str(Get(limits, name.c_str()))));
          }
        }
      }
    }
  }
  void Container(const json& c, const std::string& field, const std::set<std::string>& volumes) {
    Name(Str(Get(c, "name")), field + ".name");
    if (Str(Get(c, "image")).empty()) errors.push_back(field + ".image: Required value");
    const json& env = Get(c, "env");
    for (size_t i = 0; env.is_array() && i < env.size(); ++i) {
      std::string name = Str(Get(env[i], "name"));
      std::string at = field + ".env[" + std::to_string(i) + "].name";
      if (name.empty()) {
        errors.push_back(at + ": Required value");
      } else if (std::string why = CheckEnvVarName(name); !why.empty()) {
        errors.push_back(Invalid(at, name, why));
      }
    }
    const json& ports = Get(c, "ports");
    std::set<std::string> port_names;
    for (size_t i = 0; ports.is_array() && i < ports.size(); ++i) {
      std::string at = field + ".ports[" + std::to_string(i) + "]";
      std::string name = Str(Get(ports[i], "name"));
      if (!name.empty()) {
        if (std::string why = CheckPortName(name); !why.empty()) errors.push_back(Invalid(at + ".name", name, why));
        if (!port_names.insert(name).second) errors.push_back(at + ".name: Duplicate value: " + Quote(name));
      }
      const json& number = Get(ports[i], "containerPort");
      if (!number.is_number_integer() || number.get<int64_t>() < 1 || number.get<int64_t>() > 65535) {
        errors.push_back(Invalid(at + ".containerPort", number.dump(), "must be between 1 and 65535, inclusive"));
      }
    }
    Resources(Get(c, "resources"), field + ".resources");
    const json& mounts = Get(c, "volumeMounts");
    for (size_t i = 0; mounts.is_array() && i < mounts.size(); ++i) {
      std::string name = Str(Get(mounts[i], "name"));
      if (!volumes.count(name)) {
        errors.push_back(field + ".volumeMounts[" + std::to_string(i) + "].name: Not found: " + Quote(name));
      }
    }
  }
  void Template(const json& tmpl, const std::string& field) {
    const json& meta = Get(tmpl, "metadata");
    Labels(Get(meta, "labels"), field + ".metadata.labels");
    Annotations(Get(meta, "annotations"), field + ".metadata.annotations");
    const json& spec = Get(tmpl, "spec");
    std::string at = field + ".spec";
    std::set<std::string> volumes;
    const json& vols = Get(spec, "volumes");
    for (size_t i = 0; vols.is_array() && i < vols.size(); ++i) {
      std::string name = Str(Get(vols[i], "name"));
      Name(name, at + ".volumes[" + std::to_string(i) + "].name");
      if (!volumes.insert(name).second) {
        errors.push_back(at + ".volumes[" + std::to_string(i) + "].name: Duplicate value: " + Quote(name));
      }
    }
    const json& containers = Get(spec, "containers");
    for (size_t i = 0; containers.is_array() && i < containers.size(); ++i) {
      Container(containers[i], at + ".containers[" + std::to_string(i) + "]", volumes);
    }
    Labels(Get(spec, "nodeSelector"), at + ".nodeSelector");
    const json& tolerations = Get(spec, "tolerations");
    for (size_t i = 0; tolerations.is_array() && i < tolerations.size(); ++i) {
      std::string key = Str(Get(tolerations[i], "key"));
      if (key.empty()) continue;
      if (std::string why = CheckQualifiedName(key); !why.empty()) {
        errors.push_back(Invalid(at + ".tolerations[" + std::to_string(i) + "].key", key, why));
      }
    }
    if (std::string sa = Str(Get(spec, "serviceAccountName")); !sa.empty()) Name(sa, at + ".serviceAccountName", true);
  }
};

std::string NamePart(const std::string& name) {
  if (name.empty()) return "name part must be non-empty";
  if (name.size() > 63) return "name part must be no more than 63 characters";
  bool ok = Alnum(name.front()) && Alnum(name.back());
  for (char c : name) ok = ok && (Alnum(c) || c == '-' || c == '_' || c == '.');
  if (!ok) {
    return "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
           "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
           "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
  }
  return "";
}

}  // namespace

std::string CheckDns1123Label(const std::string& v) {
  if (v.size() > 63) return "must be no more than 63 characters";
  bool ok = !v.empty() && LowerAlnum(v.front()) && LowerAlnum(v.back());
  for (char c : v) ok = ok && (LowerAlnum(c) || c == '-');
  if (ok) return "";
  return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
         "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
         "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
}

std::string CheckDns1123Subdomain(const std::string& v) {
  if (v.size() > 253) return "must be no more than 253 characters";
  bool ok = !v.empty();
  size_t start = 0;
  while (ok && start <= v.size()) {
    size_t dot = v.find('.', start);
    std::string part = v.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    ok = !part.empty() && LowerAlnum(part.front()) && LowerAlnum(part.back());
    for (char c : part) ok = ok && (LowerAlnum(c) || c == '-');
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (ok) return "";
  return "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
         "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
         "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
}

std::string CheckQualifiedName(const std::string& v) {
  size_t slash = v.find('/');
  if (slash == std::string::npos) return NamePart(v);
  if (v.find('/', slash + 1) != std::string::npos) {
    return "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
           "with an alphanumeric character, with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
  }
  std::string prefix = v.substr(0, slash);
  if (prefix.empty()) return "prefix part must be non-empty";
  if (std::string why = CheckDns1123Subdomain(prefix); !why.empty()) return "prefix part " + why;
  return NamePart(v.substr(slash + 1));
}

std::string CheckLabelValue(const std::string& v) {
  if (v.empty()) return "";
  if (v.size() > 63) return "must be no more than 63 characters";
  bool ok = Alnum(v.front()) && Alnum(v.back());
  for (char c : v) ok = ok && (Alnum(c) || c == '-' || c == '_' || c == '.');
  if (ok) return "";
  return "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
         "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
         "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
}

std::string CheckEnvVarName(const std::string& v) {
  bool ok = !v.empty() && !std::isdigit(static_cast<unsigned char>(v.front()));
  for (char c : v) ok = ok && (Alnum(c) || c == '-' || c == '_' || c == '.');
  if (ok) return "";
  return "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and "
         "must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for "
         "validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')";
}

std::string CheckPortName(const std::string& v) {
  if (v.size() > 15) return "must be no more than 15 characters";
  bool letter = false;
  for (char c : v) {
    if (!LowerAlnum(c) && c != '-') return "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)";
    letter = letter || (c >= 'a' && c <= 'z');
  }
  if (!letter) return "must contain at least one letter (a-z)";
  if (v.find("--") != std::string::npos) return "must not contain consecutive hyphens";
  if (v.front() == '-' || v.back() == '-') return "must not begin or end with a hyphen";
  return "";
}

std::string CheckQuantity(const std::string& v) {
  // ^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$, then a number the suffix may follow.
  size_t i = 0;
  if (i < v.size() && (v[i] == '+' || v[i] == '-')) ++i;
  size_t digits = i;
  while (i < v.size() && (std::isdigit(static_cast<unsigned char>(v[i])) || v[i] == '.')) ++i;
  bool ok = i > digits;
  std::string suffix = v.substr(i);
  static const std::set<std::string> kSuffixes = {"",   "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u",
                                                  "m",  "k",  "M",  "G",  "T",  "P",  "E"};
  bool exponent = suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E') &&
                  suffix.find_first_not_of("0123456789+-", 1) == std::string::npos;
  ok = ok && (kSuffixes.count(suffix) || exponent);
  if (ok) return "";
  return "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
}

std::vector<std::string> CheckPodTemplates(const json& job) {
  Checker check;
  const json& tasks = Get(Get(job, "spec"), "tasks");
  for (size_t i = 0; tasks.is_array() && i < tasks.size(); ++i) {
    check.Template(Get(tasks[i], "template"), "spec.tasks[" + std::to_string(i) + "].template");
  }
  return check.errors;
}

}  // namespace torchxd::k8sbridge
