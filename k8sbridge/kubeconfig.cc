#include "k8sbridge/kubeconfig.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "core/text.h"

namespace torchxd::k8sbridge {
namespace {

namespace fs = std::filesystem;

struct Named {
  YAML::Node node;
  std::string dir;  // the defining file's folder, for relative paths
  std::string file;
};

// What a list of kubeconfig files says, merged first-wins as kubectl does.
struct Merged {
  std::map<std::string, Named> clusters, users, contexts;
  std::string current_context;
  std::vector<std::string> files;
};

Result<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(Error::NotFound(what + " " + path + ": cannot be read"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Scalar(const YAML::Node& node, const char* key) {
  if (!node.IsMap()) return std::string();  // operator[] throws on a scalar or a list
  const YAML::Node v = node[key];
  return v && v.IsScalar() ? v.as<std::string>() : std::string();
}

// A map's entry, or an undefined node (never an exception).
YAML::Node Entry(const YAML::Node& node, const char* key) {
  return node.IsMap() ? node[key] : YAML::Node(YAML::NodeType::Undefined);
}

Result<void> MergeFile(const std::string& path, Merged& m) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return Fail(Error::NotFound("kubeconfig " + path + ": cannot be read"));
  } catch (const YAML::Exception& e) {
    return Fail(Error::InvalidArgument("kubeconfig " + path + ": not valid YAML: " + e.what()));
  }
  m.files.push_back(path);
  if (!root || root.IsNull()) return {};
  if (!root.IsMap()) return Fail(Error::InvalidArgument("kubeconfig " + path + ": not a mapping"));
  std::string dir = fs::path(path).parent_path().string();
  auto collect = [&](const char* list, const char* inner, std::map<std::string, Named>& into) -> Result<void> {
    const YAML::Node items = Entry(root, list);
    if (!items) return {};
    if (!items.IsSequence()) return Fail(Error::InvalidArgument("kubeconfig " + path + ": " + list + " must be a list"));
    for (const auto& item : items) {
      std::string name = Scalar(item, "name");
      YAML::Node value = Entry(item, inner);
      if (name.empty() || !value) continue;
      into.emplace(name, Named{value, dir, path});  // first file wins
    }
    return {};
  };
  if (auto ok = collect("clusters", "cluster", m.clusters); !ok) return ok;
  if (auto ok = collect("users", "user", m.users); !ok) return ok;
  if (auto ok = collect("contexts", "context", m.contexts); !ok) return ok;
  if (m.current_context.empty()) m.current_context = Scalar(root, "current-context");
  return {};
}

std::string Resolve(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return (fs::path(dir) / path).string();
}

// "<key>-data" (base64) beats "<key>" (a file) as in client-go.
Result<void> TakePem(const Named& n, const std::string& key, std::string& file, std::string& pem) {
  std::string data = Scalar(n.node, (key + "-data").c_str());
  if (!data.empty()) {
    auto decoded = DecodeBase64(data);
    if (!decoded) return Fail(Error::InvalidArgument("kubeconfig " + n.file + ": " + key + "-data: " + decoded.error().message));
    pem = std::move(*decoded);
    return {};
  }
  std::string path = Scalar(n.node, key.c_str());
  if (path.empty()) return {};
  file = Resolve(n.dir, path);
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    return Fail(Error::NotFound("kubeconfig " + n.file + ": " + key + " " + file + " does not exist"));
  }
  return {};
}

Result<KubeConfig> FromMerged(const Merged& m, const KubeConfigSearch& search) {
  std::string files = core::Join(m.files, ":");
  std::string context_name = search.context.value_or(m.current_context);
  if (context_name.empty()) {
    return Fail(Error::InvalidArgument("kubeconfig " + files +
                                       ": no current-context; run `kubectl config use-context NAME`"));
  }
  auto ctx = m.contexts.find(context_name);
  if (ctx == m.contexts.end()) {
    return Fail(Error::NotFound("kubeconfig " + files + ": context \"" + context_name + "\" is not defined"));
  }
  KubeConfig config;
  config.source = "kubeconfig " + files + " (context " + context_name + ")";
  std::string ns = Scalar(ctx->second.node, "namespace");
  if (!ns.empty()) config.namespace_ = ns;
  std::string cluster_name = Scalar(ctx->second.node, "cluster");
  auto cluster = m.clusters.find(cluster_name);
  if (cluster == m.clusters.end()) {
    return Fail(Error::NotFound(config.source + ": cluster \"" + cluster_name + "\" is not defined"));
  }
  config.server = Scalar(cluster->second.node, "server");
  if (config.server.empty()) return Fail(Error::InvalidArgument(config.source + ": cluster " + cluster_name + " has no server"));
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  config.tls.insecure_skip_verify = Scalar(cluster->second.node, "insecure-skip-tls-verify") == "true";
  if (auto ok = TakePem(cluster->second, "certificate-authority", config.tls.ca_file, config.tls.ca_pem); !ok) {
    return Fail(ok.error());
  }
  std::string user_name = Scalar(ctx->second.node, "user");
  if (user_name.empty()) return config;  // anonymous
  auto user = m.users.find(user_name);
  if (user == m.users.end()) return Fail(Error::NotFound(config.source + ": user \"" + user_name + "\" is not defined"));
  const Named& u = user->second;
  for (const char* plugin : {"exec", "auth-provider"}) {
    if (Entry(u.node, plugin)) {
      return Fail(Error::InvalidArgument(config.source + ": user " + user_name + " uses an " + plugin +
                                         " credential plugin, which torchxd does not run; use a token, "
                                         "tokenFile or client certificate"));
    }
  }
  if (!Scalar(u.node, "username").empty()) {
    return Fail(Error::InvalidArgument(config.source + ": user " + user_name +
                                       " uses basic auth (username/password), which torchxd does not support"));
  }
  if (auto ok = TakePem(u, "client-certificate", config.tls.cert_file, config.tls.cert_pem); !ok) return Fail(ok.error());
  if (auto ok = TakePem(u, "client-key", config.tls.key_file, config.tls.key_pem); !ok) return Fail(ok.error());
  config.token = Scalar(u.node, "token");
  std::string token_file = Scalar(u.node, "tokenFile");
  if (config.token.empty() && !token_file.empty()) {
    auto token = ReadFile(Resolve(u.dir, token_file), config.source + ": tokenFile");
    if (!token) return Fail(token.error());
    config.token = std::string(core::Trim(*token));
  }
  return config;
}

Result<KubeConfig> InCluster(const KubeConfigSearch& search, const std::string& host, const std::string& port) {
  KubeConfig config;
  config.source = "in-cluster service account (" + search.service_account_dir + ")";
  bool v6 = host.find(':') != std::string::npos;
  config.server = "https://" + (v6 ? "[" + host + "]" : host) + ":" + port;
  auto token = ReadFile(search.service_account_dir + "/token", "service account token");
  if (!token) return Fail(token.error());
  config.token = std::string(core::Trim(*token));
  config.tls.ca_file = search.service_account_dir + "/ca.crt";
  if (auto ns = ReadFile(search.service_account_dir + "/namespace", "namespace")) {
    config.namespace_ = std::string(core::Trim(*ns));
  }
  return config;
}

}  // namespace

Result<std::string> DecodeBase64(const std::string& text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  size_t padding = 0;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    int v = value(c);
    if (v < 0 || padding > 0) return Fail(Error::InvalidArgument("not valid base64"));
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (padding > 2 || bits >= 6) return Fail(Error::InvalidArgument("not valid base64"));
  return out;
}

Result<KubeConfig> LoadKubeConfig(const KubeConfigSearch& search, const core::EnvLookup& env) {
  std::vector<std::string> files;
  std::string tried;
  if (!search.explicit_path.empty()) {
    files.push_back(search.explicit_path);
  } else if (auto list = env("KUBECONFIG"); list && !list->empty()) {
    for (const auto& f : core::Split(*list, ':')) {
      std::error_code ec;
      if (!f.empty() && fs::exists(f, ec)) files.push_back(f);  // kubectl skips missing entries
    }
    if (files.empty()) tried = "$KUBECONFIG=" + *list + " names no existing file";
  } else if (auto home = env("HOME"); home && !home->empty()) {
    std::string path = *home + "/.kube/config";
    std::error_code ec;
    if (fs::exists(path, ec)) files.push_back(path);
    tried = path + " does not exist";
  }
  if (!files.empty()) {
    try {  // yaml-cpp reports odd shapes by throwing: never past this function
      Merged merged;
      for (const auto& f : files) {
        if (auto ok = MergeFile(f, merged); !ok) return Fail(ok.error());
      }
      return FromMerged(merged, search);
    } catch (const YAML::Exception& e) {
      return Fail(Error::InvalidArgument("kubeconfig " + core::Join(files, ":") + ": " + e.what()));
    }
  }
  auto host = env("KUBERNETES_SERVICE_HOST");
  auto port = env("KUBERNETES_SERVICE_PORT");
  if (host && port && !host->empty()) return InCluster(search, *host, *port);
  return Fail(Error::NotFound("no Kubernetes configuration: " + (tried.empty() ? "$HOME is not set" : tried) +
                              ", and this is not a pod (no $KUBERNETES_SERVICE_HOST). Set $KUBECONFIG or "
                              "start torchxd with --kubeconfig FILE"));
}

}  // namespace torchxd::k8sbridge
